"""The headless face: one module per command family (main parses and dispatches; jobs, runs,
fleet, follow, diagnose) and console.py, the terminal painter they share.
"""
