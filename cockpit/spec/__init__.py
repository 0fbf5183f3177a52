"""JobSpec: a job file (YAML) -> a frozen, typed model. model (JobSpec, load_spec), fields (the
field checks), nodes (the nodes: section), yamlpos (safe YAML with file:line:col positions and
limits), jobfile (reading a job file from disk). Pure: no IO beyond reading the file.
"""
