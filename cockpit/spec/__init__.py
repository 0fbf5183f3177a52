"""JobSpec: a job file (YAML) -> a frozen, typed model. model (JobSpec, load_spec), fields (the
field checks and their bounds), formats (what a name, host, Slurm time or hostlist looks like), nodes
(the nodes: section), sections (the slurm: and sweep: blocks), yamlpos (safe YAML with file:line:col
positions and limits), jobfile (reading a job file from disk), pyyaml (PyYAML imported with its pure-Python
reader's pattern compiled when first used). Pure: no IO beyond reading the file.
"""

from cockpit.spec import pyyaml  # noqa: F401  (first: it imports yaml before any module here does)
