"""The scale harness (issue 32): stand-in ranks that write what real ranks write, run through cockpit's real
launch path, supervisor and readers, so 4,096 ranks fit on two cores. standin.py is the rank side,
harness.py starts and steers runs of them, product.py is every direct call into cockpit, sshlab.py the
network-namespace nodes for ssh runs; tests/bench/bench_scale.py measures with them."""
