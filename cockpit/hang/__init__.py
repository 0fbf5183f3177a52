"""Hangs and stragglers: what every rank is doing, seen from outside it.

    rankhook.py   runs INSIDE each rank (stdlib only, installed as its sitecustomize): stacks on SIGURG,
                  collective timing and a beat every second, Flight Recorder dumps on request
    progress.py   pure: per-rank progress from the files the ranks write; stall and straggler verdicts
    stacks.py     pure: faulthandler dumps and Flight Recorder traces -> who is stuck where, who waits
    gather.py     IO: read a run's rank files, signal ranks for stacks (local, ssh, Slurm), wait for them
"""
