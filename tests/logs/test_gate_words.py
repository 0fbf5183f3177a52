"""The gate's word test, three ways: a loop of ``in`` tests (the definition), the stdlib's trie regex
(``gate.has_word``) and hyperscan's (``scan.Scanner.has_word``, where the ``fast`` extra is installed). A template
the gate has not seen goes to one of the two fast ones; they must answer as the loop does on any bytes."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cockpit.logs.parse import rules
from cockpit.logs.parse.gate import TRIGGER, ZEROS, Gate, has_word
from cockpit.logs.parse.rules import trigger_words
from cockpit.logs.parse.scan import scanner

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
WORDS = [w.encode() for w in trigger_words()]


def _by_loop(template: bytes) -> bool:
    return template.endswith((b"]:", b"]: ")) or any(w in template for w in WORDS)


def _tests() -> list:
    found = [pytest.param(has_word, id="stdlib")]
    scan = scanner()
    if scan is not None:
        found.append(pytest.param(scan.has_word({}), id="hyperscan"))
    return found


def _corpus_templates() -> list[bytes]:
    lines = (line for c in ("nccl", "nccl2", "nccl3") for p in sorted((FIXTURES / c).rglob("*.log"))
             for line in p.read_bytes().split(b"\n"))
    return list(dict.fromkeys(line.translate(ZEROS) for line in lines))


@pytest.mark.parametrize("test", _tests())
def test_every_corpus_template_gets_the_loops_answer(test):
    templates = _corpus_templates()
    assert len(templates) > 1000
    answers = [test(t) for t in templates]
    assert answers == [_by_loop(t) for t in templates]
    assert 0.2 < sum(answers) / len(answers) < 0.9  # both answers are common: the check can fail either way


_piece = st.one_of(st.sampled_from(WORDS), st.sampled_from([b"]:", b"]: ", b"\r", b"\x1b", b" ", b"0", b"\xff"]),
                   st.binary(max_size=12))


@pytest.mark.parametrize("test", _tests())
@settings(max_examples=300, deadline=None)
@given(pieces=st.lists(_piece, max_size=8), cut=st.integers(0, 3))
def test_any_bytes_get_the_loops_answer(test, pieces: list[bytes], cut: int):
    template = b"".join(pieces).replace(b"\n", b" ")
    for t in (template, template[cut:], template[:-cut or None]):  # words cut at either end
        assert test(t) == _by_loop(t), t


def test_a_gate_given_a_word_test_uses_it_for_templates_it_has_not_seen():
    asked: list[bytes] = []
    gate = Gate(lambda t: asked.append(t) or True)
    assert gate.of_text("step 12 loss 0.5") & TRIGGER
    assert gate.of_text("step 13 loss 0.7") & TRIGGER  # the same template: answered from the cache
    assert asked == [b"step 00 loss 0.0"]


@pytest.mark.skipif(scanner() is None, reason="hyperscan (the fast extra) is not installed")
@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(st.sampled_from([b"]:", b"]: ", b"\n", b" ", b"x", b"[0]", b"\r", b"\x1b", b"]"]),
                         st.sampled_from(WORDS)), max_size=24))
def test_the_scanners_marks_flag_each_line_as_the_gate_does(pieces: list[bytes]):
    """Every mark lies inside its line (a table head's on the line's own newline), and the lines marked, with
    their flags, are those the gate flags (``TRIGGER``, ``SPECIAL``)."""
    from cockpit.logs.parse.gate import SPECIAL
    from cockpit.logs.parse.scan import MARK_SHIFT

    block = b"".join(pieces)
    marks = scanner().marks(block, {})  # type: ignore[union-attr]
    assert marks is not None  # far below the dense threshold
    got: dict[int, int] = {}
    for mark in marks:
        line = block.count(b"\n", 0, mark >> MARK_SHIFT)
        got[line] = got.get(line, 0) | (mark & 7)
    gate = Gate()
    want = {i: flags & (TRIGGER | SPECIAL) for i, line in enumerate(block.split(b"\n"))
            if (flags := gate.of_template(line.translate(ZEROS))) & (TRIGGER | SPECIAL)}
    assert got == want


_TOKENS = list(dict.fromkeys(t for rule in rules._RULES for t in rule.tokens))


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(st.sampled_from(_TOKENS), st.text(max_size=8)), max_size=6), st.integers(0, 3))
def test_the_rules_token_search_finds_a_token_exactly_where_one_is(pieces: list[str], cut: int):
    """``rules._failures`` skips its rules where ``_ANY_TOKEN`` (a trie regex) finds no rule's token."""
    from cockpit.logs.parse.rules import _ANY_TOKEN

    text = "".join(pieces)
    for t in (text, text[cut:], text[:-cut or None]):
        assert (_ANY_TOKEN.search(t) is not None) == any(token in t for token in _TOKENS), t


@settings(max_examples=500, deadline=None)
@given(st.lists(st.one_of(st.sampled_from(_TOKENS), st.sampled_from(_TOKENS).map(lambda t: t[1:] + t[:2]),
                          st.text(max_size=8)), max_size=24), st.integers(0, 3))
def test_the_rules_tokens_found_from_place_to_place_are_those_in_the_text(pieces: list[str], cut: int):
    """``rules._present`` (which tokens a text holds, from each place one starts to the next): the tokens a
    ``token in text`` per token finds, overlapping and repeated ones too; None only past ``_STARTS_MAX`` places."""
    text = "".join(pieces)
    for t in (text, text[cut:], text[:-cut or None]):
        first = rules._ANY_TOKEN.search(t)
        if first is None:
            continue
        want = {token for token in _TOKENS if token in t}
        got = rules._present(t, first.start())
        if got is None:
            assert sum(t.startswith(token, i) for i in range(len(t)) for token in _TOKENS) > rules._STARTS_MAX
        else:
            assert got == want, t


def test_tokens_that_overlap_or_start_alike_are_all_found():
    """A token inside another, one another starts with, and two that share their head, in one text."""
    heads = [t for t in _TOKENS if any(o != t and o.startswith(t) for o in _TOKENS)]
    assert heads  # the case exists in the rules
    longer = next(o for o in _TOKENS if o != heads[0] and o.startswith(heads[0]))
    text = "x " + longer + " y"
    assert {heads[0], longer} <= rules._present(text, rules._ANY_TOKEN.search(text).start())  # type: ignore[operator]


_PLAIN = rules._PLAIN_GATE.pattern.split("|")


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(st.sampled_from(_PLAIN), st.sampled_from(_PLAIN).map(lambda w: w[1:] + w[:1]),
                          st.text(max_size=8)), max_size=8), st.integers(0, 3))
def test_the_plain_gates_trie_answers_as_the_gate(pieces: list[str], cut: int):
    """``classify`` tests other output with ``_PLAIN_ANY``, the trie of ``_PLAIN_GATE``'s words: each word is
    literal (it matches itself), and on any text the trie finds one where the gate does."""
    assert all(rules._PLAIN_GATE.fullmatch(w) and rules._PLAIN_ANY.search(w) for w in _PLAIN)
    text = "".join(pieces)
    for t in (text, text[cut:], text[:-cut or None]):
        assert (rules._PLAIN_ANY.search(t) is None) == (rules._PLAIN_GATE.search(t) is None), t
