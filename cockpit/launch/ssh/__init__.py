"""The ssh launcher: torchrun on each node over SSH, no scheduler. launcher (the protocol), plan (what each node runs),
shell (the start script), facts (asking the nodes), node (the supervisor's view of one node, and the run's coordinated
teardown), stream (the node agent's `watch` stream on this side), stacks (the ranks' stacks, through the node agent),
orphan (stop or recover a run whose supervisor is gone).
"""
