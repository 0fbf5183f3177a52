"""Log lines -> typed events, linear on any input: parser (LineParser), with a cheap gate (gate, scan) in front;
rules, nccl and ends say what is recognised, prefix where a line came from, table and trace read torchelastic's
failure table and a Python traceback, block and wrap walk a block and its hard wraps; event and kinds are the
values."""
