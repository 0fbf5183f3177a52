"""The terminal UI: a face over cockpit's core (fleet, spec/render, launch, runs, logs). The ONLY package that
imports textual; it never imports torch. All IO runs in workers; the pure models it renders (form, fleetview,
logstore, logfilter) import no textual, so they are tested on their own. Entry point: ``app.run_tui``."""
