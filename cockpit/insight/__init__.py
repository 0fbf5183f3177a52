"""What cockpit CONCLUDES about a run, for both faces (cli, tui): its diagnosis (diagnosis, with the root cause of
a failure in cause), the configuration fixes it proposes (proposals) and the fixed job file (fixes), its forecast
(forecast, pure; forecast_inputs reads a run's), a sweep's trial table (sweep_table) and charts (sweep_series),
and the runs as `cockpit ps` lists them, a finished one from its summary (listing)."""
