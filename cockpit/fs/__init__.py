"""Files on a shared login node: where cockpit keeps its own (paths: XDG, a job file's relative
paths) and how a run's files are opened (safeio: regular files only, never through a symlink,
reads bounded, writes only into a directory the caller owns)."""
