"""Hangs and stragglers: what every rank is doing, seen from outside it. What runs inside each rank (stacks
on SIGURG, its DataLoader workers' too, collective timing, a beat every second, Flight Recorder dumps) is
cockpit.node.rankhook (with cockpit.node.rankworkers).

    progress.py       pure: per-rank progress from the files the ranks write; start, stall and stopped verdicts
    straggler.py      pure: the straggler rule over the ranks' beats (a pause is not straggling)
    stacks.py         pure: faulthandler dumps and Flight Recorder traces -> where a rank is, what it waits in
    finding.py        pure: evidence -> the finding (culprit, victims, collective, DataLoader worker, uneven
                      inputs), the "starting" words and the stacks report
    words.py          pure: a finding's text, hint and next command; ranks as ranges ("ranks 0-3072, 3074-4095")
    classes.py        pure: stacks folded by signature into classes of ranks, the fewest ranks first (STAT's way)
    transport.py      pure: transport evidence records (TCP sockets, interfaces, IB ports) per rank and node
    transport_parse.py, transport_raw.py, ras.py
                      pure: ss, /proc/net/tcp, sysfs, IB ports, NCCL RAS text/JSON -> those records
    rasreport.py, rasread.py, raswords.py
                      pure: NCCL RAS records; a node's live RAS answer (cockpit.node.rasask) read, the node it
                      blames, the job's RAS address; its rows and JSON
    linkfind.py       pure: the link finding: the node whose connections stopped (dead_link) or crawl
                      (slow_link), the node RAS alone names (ras_missing), or "no single node" with the table;
                      linkwords.py: its words and rows
    evidence.py       what one rank (and its workers) said when asked
    gather.py         IO: read a run's rank files; ask local and Slurm ranks for their stacks (an ssh run's
                      come from the ssh launcher's stacks.py, through the node agent)
    watchdog.py       the supervisor's once-a-second look: status.json's progress, watch, findings and history,
                      on_stall (the typed records it keeps: cockpit.run.progress, cockpit.run.findings)
"""
