"""PyYAML, imported without compiling the character class of its pure-Python reader at import.

``import yaml`` imports every part of PyYAML, the pure-Python reader among them, whose class body compiles
``NON_PRINTABLE``, a negated class of the Unicode ranges YAML allows: re's compiler builds its charset in Python,
58 M instructions, 40% of a whole `python -c pass` (issue 29: `cockpit validate` and `render` at the Python
floor). cockpit reads job files with libyaml (CSafeLoader), which checks the characters itself; the pure-Python
reader runs only where libyaml is missing or refused a file (cockpit.spec.yamlpos). So that one pattern is
compiled when it is first used, by that reader, and it behaves the same from then on.

While ``yaml`` is imported here, ``re.compile`` of exactly PyYAML's pattern gives a ``_Deferred`` in its place;
every other pattern, from any thread, is compiled as before, and ``re.compile`` is the same function again once
the import is done. A PyYAML whose pattern differs is imported as it is (compiled at import: slower, the same).
"""

from __future__ import annotations

import re
import sys
import threading
from typing import Any

# yaml.reader.Reader.NON_PRINTABLE's text (PyYAML 5.1 to 6.0.3)
NON_PRINTABLE = "[^\x09\x0A\x0D\x20-\x7E\x85\xA0-\uD7FF\uE000-\uFFFD\U00010000-\U0010ffff]"

_compile = re.compile
_lock = threading.Lock()


class _Deferred:
    """A pattern compiled the first time any of its attributes (``search``, ``match``, ...) is used."""

    def __init__(self, pattern: str, flags: int):
        self._args = (pattern, flags)
        self._compiled: re.Pattern[str] | None = None

    def __getattr__(self, name: str) -> Any:  # (only what the instance lacks: the pattern's own attributes)
        if self._compiled is None:
            self._compiled = _compile(*self._args)
        return getattr(self._compiled, name)


def _deferring(pattern: Any, flags: int = 0) -> Any:
    if type(pattern) is str and pattern == NON_PRINTABLE:
        return _Deferred(pattern, flags)
    return _compile(pattern, flags)


def _import() -> None:
    if "yaml" in sys.modules:  # imported already (by a module outside cockpit.spec): as it is
        return
    with _lock:
        re.compile = _deferring
        try:
            import yaml  # noqa: F401
        finally:
            re.compile = _compile


_import()  # (cockpit.spec's __init__ imports this module first: before any of its modules imports yaml)
