"""JobSpec: a job file (YAML) -> a frozen, typed model. model (JobSpec, load_spec), fields (the
field checks and their bounds), formats (what a name, host, Slurm time or hostlist looks like), nodes
(the nodes: section), sections (the slurm: and sweep: blocks), yamlpos (safe YAML with file:line:col
positions and limits), jobfile (reading a job file from disk). Pure: no IO beyond reading the file.
"""
