"""Many nodes: cluster (node names: hostlists and the cluster file, NodesError), nodes (connections,
refresh, NodeStatus per node, Slurm's node list), report (the typed NodeReport the rest of cockpit reads;
dicts only at the --json edge).
"""
