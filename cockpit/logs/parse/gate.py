"""The cheap test in front of the parser: does a physical line hold any word that could make it an event?

Most lines of a rank log (training steps, NCCL's chatter) say nothing. ``TRIGGERS`` lists every word that any
path of ``rules.classify`` or the failure-table reader needs (a test checks this on the corpus and on
generated text): a line without one of them is no event on its own, so it costs no regex and builds nothing.

Testing ~140 words on every line would cost more than parsing it, so the answer is cached per *template*: the
line's UTF-8 bytes with every digit replaced by ``0`` (``bytes.translate``, a C loop). No trigger word holds a
digit, so a line holds a word exactly when its template does: the answer is the line's own. A training loop
prints the same template with new numbers on every step, so a 1 GB log has a few thousand templates;
``block_templates`` makes them for a whole block of lines at once. (Deleting the digits instead would merge
more templates, but then ``r1ror`` reads as ``rror``: an answer no byte scanner of the line itself gives, and
``scan`` is one.)

A template not seen before (most lines of an error-dense log: each says something else) is tested in C: by
``Gate.words`` where the parser gave it one (hyperscan's, ``scan.Scanner.has_word``: ~1.5 us), else by one
regex of the words merged into a trie (``trie``: ~9 us, where a loop of ``in`` tests took ~17 us).

Pure and stdlib-only.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from cockpit.logs.parse.rules import trigger_words
from cockpit.logs.parse.trie import trie_pattern

TRIGGER = 1
"""The line holds a trigger word (or ends like a failure-table head, ``[N]:``)."""
SPECIAL = 2
"""The line holds a carriage return or an escape byte: it takes the general path (redraws, ANSI)."""
RESIDUE = 4
"""The line may start with colour residue (``[0m``, ``[1;31m``: ``prefix.strip_ansi`` removes it)."""

ZEROS = bytes.maketrans(b"123456789", b"000000000")
_WORDS = tuple(w.encode() for w in trigger_words())


_WORDS_RE = re.compile(trie_pattern(list(_WORDS)))
_CACHE_MAX = 50_000  # templates kept per parser; past it the cache starts again (bounded memory, same answers)
_CACHE_LONGEST = 1024  # longer templates are answered, not kept: a log of unique 100 KB lines must not fill memory


def has_word(template: bytes) -> bool:
    """Whether ``template`` holds a trigger word or ends like a failure-table head (the stdlib's test)."""
    return template.endswith((b"]:", b"]: ")) or _WORDS_RE.search(template) is not None


def _flags(template: bytes, words: Callable[[bytes], bool]) -> int:
    flags = SPECIAL if b"\r" in template or b"\x1b" in template else 0
    if template[:1] == b"[" and template[1:].lstrip(b";0")[:1] == b"m":  # "[1;31m" is "[0;00m" here
        flags |= RESIDUE
    return flags | TRIGGER if words(template) else flags


class Gate:
    """Flags of lines by template, cached (one per parser: the cache is its only state)."""

    __slots__ = ("cache", "words")

    def __init__(self, words: Callable[[bytes], bool] = has_word) -> None:
        self.cache: dict[bytes, int] = {}
        """template -> flags, for callers that look up first (a hot loop) and call ``of_template`` on a miss."""
        self.words = words
        """``has_word``, or a test that gives the same answers faster (the parser sets hyperscan's)."""

    def of_template(self, template: bytes) -> int:
        """``TRIGGER`` / ``SPECIAL`` bits of a line whose template (``template_of``) this is."""
        flags = self.cache.get(template)
        if flags is None:
            flags = _flags(template, self.words)
            if len(template) <= _CACHE_LONGEST:
                if len(self.cache) >= _CACHE_MAX:
                    self.cache.clear()
                self.cache[template] = flags
        return flags

    def of_text(self, text: str) -> int:
        """The flags of one line of text (the live path: one line at a time)."""
        return self.of_template(template_of(text))


def template_of(text: str) -> bytes:
    """The line's template: its UTF-8 bytes, digits made ``0`` (unencodable characters replaced)."""
    return text.encode("utf-8", "replace").translate(ZEROS)


def block_templates(block: bytes) -> list[bytes]:
    """The templates of every line of a block of UTF-8 bytes, split on b"\\n" as ``block.split(b"\\n")``."""
    return block.translate(ZEROS).split(b"\n")
