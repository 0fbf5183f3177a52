"""Many nodes: nodes (connections, refresh, NodeStatus per node, the cluster file), report (the
typed NodeReport the rest of cockpit reads; dicts only at the --json edge).
"""
