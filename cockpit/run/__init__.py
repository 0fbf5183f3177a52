"""What a run directory IS: where each file lives (layout), the typed records inside status.json (records,
status), reading and writing it (store), following it (watch), and whose it is (trust: which runs directory
may hold the caller's runs, which runs the caller may act on). layout, records and status are pure and stdlib
only: the ranks import layout."""
