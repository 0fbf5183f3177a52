"""Hangs and stragglers: what every rank is doing, seen from outside it. What runs inside each rank (stacks
on SIGURG, collective timing, a beat every second, Flight Recorder dumps) is cockpit.node.rankhook.

    progress.py       pure: per-rank progress from the files the ranks write; stall and straggler verdicts
    stacks.py         pure: faulthandler dumps and Flight Recorder traces -> where a rank is, what it waits in
    finding.py        pure: evidence -> the finding (culprit, victims, collective) and the stacks report
    gather.py         IO: read a run's rank files; ask local and Slurm ranks for their stacks
    remote_stacks.py  IO: the same for ssh nodes, through the node agent
    watchdog.py       the supervisor's once-a-second look: status.json's progress and findings, on_stall
"""
