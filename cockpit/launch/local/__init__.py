"""The local launcher: one torchrun on this machine (launcher), trials side by side (sweep),
and the facts its preflight needs (facts).
"""
