"""What a run directory IS: where each file lives (layout), the typed records inside status.json (records;
progress: each rank as the watchdog last saw it; findings: its live findings and the stalls that cleared;
status), reading and writing it (store), a run as one value read once (handle), following it (watch), and whose
it is (trust: which runs directory may hold the caller's runs, which runs the caller may act on). layout,
records, progress, findings and status are pure and stdlib only: the ranks import layout."""
