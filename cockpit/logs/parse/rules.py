"""What one log record says: the dispatch that tries the failure rules (cockpit.logs.parse.rule_table)
and sends NCCL lines to ``nccl``.

Pure and stdlib-only. ``classify(text)`` turns the text of one record (a line, or a hard-wrapped line
joined back) into ``(kind, fields)`` hits, kinds from ``kinds``; ``parser.LineParser`` adds line
numbers, hosts and ranks.

Speed matters (a 2M-line log should parse in seconds), so every pattern hides behind a cheap test: an
NCCL INFO line (most of a debug log) must hold one of ``_INFO_GATE``'s words, other output one of
``_PLAIN_GATE``'s, and a failure rule's regex runs only where one of its tokens is. Patterns
match literal wording printed by NCCL, PyTorch, torchelastic, gloo and Slurm; a kind is reported only where
that wording is present (an NCCL return code alone, ``-> 3``, names no kind).
"""

from __future__ import annotations

import re

from cockpit.logs.parse.ends import CPP_THROW, is_exception_line, plugin_failed, process_end
from cockpit.logs.parse.kinds import (
    COLLECTIVE_TIMEOUT,
    GPU_ECC,
    GPU_XID,
    NCCL_WARN,
    PYTHON_EXCEPTION,
    SLURM_TASK_EXIT,
    WATCHDOG_DETECTED,
    WORKER_FAILED,
    Hit,
)
from cockpit.logs.parse.nccl import info_facts, nccl_facts
from cockpit.logs.parse.rule_table import ECC_XIDS as _ECC_XIDS
from cockpit.logs.parse.rule_table import RULES as _RULES
from cockpit.logs.parse.rule_table import Rule as _Rule
from cockpit.logs.parse.trie import any_word

# Outside NCCL's own wording every failure message also carries one of these ("RuntimeError: ...",
# "failed (exitcode: 1)", "closing signal", "timed out"): a shorter regex is a cheaper first test for the
# many lines of application output. A token a rule needs may be left out where every line it matches holds one
# of these anyway (slurmstepd's "error:", the CPU allocator's "RuntimeError"); a test tries every rule on the
# corpus without the gate.
_PLAIN_GATE = re.compile(
    r"rror|ail|AIL|imed out|onnect|signal|out of memory|Broken pipe|in use|receive grad|Duplicate GPU|CANCELLED|"
    r"Xid|ECC|shm|shared memory|oom_kill|oom-kill|Out Of Memory|OUT_OF_MEMORY|memory limit|PREEMPT|KeyboardInterrupt|"
    r"stop requested|terminate called|subprocess|return code|died with|non-zero exit|xception|truncated|"
    r"ismatch|timeout after|Timeout|fallen off|GPU is lost|GPU_IS_LOST|device handle|ut of memory: Kill|Killed|"
    r"Segmentation fault|Aborted|oint exception|Illegal instruction")
_PLAIN_ANY = any_word(_PLAIN_GATE.pattern.split("|"))
"""``_PLAIN_GATE``'s words (each literal) as a trie: the same answer to whether one is in a text, ~2/3 of the time
(a plain alternation tries each word at each place)."""
# An NCCL INFO line is an event only if it holds one of these (facts, or "Call to connect ... refused").
_INFO_GATE = re.compile(r" via | -> |Using|Init |version|NCCL_SOCKET_IFNAME|onnection|rror|ail|imed out|NET/OFI|"
                        r"Plugin load")



def trigger_words() -> tuple[str, ...]:
    """Every word ``classify`` needs to see before it can report anything: the two gates' words, every rule's
    tokens, and what ``nccl_facts`` and the watchdog line look for; and ``exitcode`` for the failure table.
    A text with none of them classifies to nothing (``gate`` relies on it; a test checks it). None holds
    a digit (``_digit_free``). Not ``_INFO_GATE``'s " -> ": it lets an INFO line through only to be told apart
    from a return-code chain (``info_facts``), and such a line gives nothing without another of these words (it
    was half of the scanner's marks on a rank log: every channel line holds it beside " via ")."""
    words = [*_PLAIN_GATE.pattern.split("|"), *(w for w in _INFO_GATE.pattern.split("|") if w != " -> "),
             *(token for rule in _RULES for token in rule.tokens),
             "version", "NCCL_SOCKET_IFNAME", "watchdog at work", "NCCL WARN", "exitcode", "NET/OFI",
             "Traceback ("]
    return tuple(dict.fromkeys(_digit_free(w) for w in words))


def _digit_free(word: str) -> str:
    """The longest piece of ``word`` without a digit: the gate tests a line's template (digits made ``0``) and
    the scanner its bytes, which agree only on words without one ("C10d store" was in neither's answer for the
    other's lines). A piece finds every line the word does, and a few more that classify to nothing."""
    return max(re.split(r"\d+", word), key=len)


_SEQ = re.compile(r"SeqNum=(\d+)")
_OP = re.compile(r"OpType=(\w+)")
_TIMEOUT_MS = re.compile(r"Timeout\(ms\)=(\d+)")
_RAN_FOR = re.compile(r"ran for (\d+) milliseconds")
_STUCK = re.compile(r"got stuck for (\d+) seconds")
_EXITCODE = re.compile(r"(?:exitcode\s*:|return code =)\s*(-?\d+)")
_WATCHDOG_WORK = re.compile(r"detected by watchdog at work(?: sequence id)?: (\d+)")


def _failure_fields(rule: _Rule, m: re.Match[str], text: str) -> dict[str, object]:
    """The parsed details of one failure hit (watchdog numbers, exit codes, Slurm task and host)."""
    kind = rule.kind
    if kind == COLLECTIVE_TIMEOUT:
        fields: dict[str, object] = {}
        for key, pattern in (("seq", _SEQ), ("timeout_ms", _TIMEOUT_MS), ("elapsed_ms", _RAN_FOR)):
            found = pattern.search(text)
            if found:
                fields[key] = int(found[1])
        op = _OP.search(text)
        if op:
            fields["op"] = op[1]
        stuck = _STUCK.search(text)
        if stuck and "elapsed_ms" not in fields:
            fields["elapsed_ms"] = int(stuck[1]) * 1000
        return fields
    if kind == GPU_XID:
        return {"xid": int(m[1])}
    if kind == WORKER_FAILED:
        code = _EXITCODE.search(text)
        return {"exit_code": int(code[1])} if code else {}
    if kind == SLURM_TASK_EXIT:
        if m[4] is not None:  # slurmstepd's "task N died by signal"
            return {"rank": int(m[4])}
        fields = {"host": m[1]}
        if m[3] is not None:
            fields["exit_code"] = int(m[3])
        if m[2].isdigit():
            fields["rank"] = int(m[2])
        return fields
    return {}


_ANY_TOKEN = any_word(list(dict.fromkeys(token for rule in _RULES for token in rule.tokens)))
"""Whether any rule's token is in a text, in one search (most records that reach the rules hold none: an NCCL
INFO line let through by "ail" of "available", a plain line by "rror" of a message no rule names)."""


_BY_HEAD: dict[str, tuple[str, ...]] = {}
for _token in dict.fromkeys(token for rule in _RULES for token in rule.tokens):
    _BY_HEAD[_token[0]] = (*_BY_HEAD.get(_token[0], ()), _token)
_STARTS_MAX = 16
"""Places a token starts at that ``_present`` visits; past them, each token is looked for in the whole text."""


def _present(text: str, at: int) -> set[str] | None:
    """The rules' tokens in ``text``, whose first one starts at ``at``: from each place a token starts (the
    next one is ``_ANY_TOKEN``'s next match: it matches where any token starts), those that start there. One
    search from place to place instead of a ``token in text`` per token (111, ~17 us on a 300-character
    line). None past ``_STARTS_MAX`` places."""
    present: set[str] = set()
    search = _ANY_TOKEN.search
    for _ in range(_STARTS_MAX):
        for token in _BY_HEAD[text[at]]:
            if text.startswith(token, at):
                present.add(token)
        m = search(text, at + 1)
        if m is None:
            return present
        at = m.start()
    return None


def _failures(text: str, nccl: bool, hits: list[Hit]) -> None:
    first = _ANY_TOKEN.search(text)
    if first is None:
        return
    present = _present(text, first.start())
    for rule in _RULES:
        if present is not None:
            if present.isdisjoint(rule.tokens):
                continue
        else:
            for token in rule.tokens:
                if token in text:
                    break
            else:
                continue
        if rule.nccl_only and not nccl:
            continue
        m = rule.pattern.search(text)
        if m and (rule.unless is None or rule.unless.search(text) is None):
            hits.append((rule.kind, _failure_fields(rule, m, text)))
            if rule.kind == GPU_XID and int(m[1]) in _ECC_XIDS:
                hits.append((GPU_ECC, {}))


def classify(text: str) -> list[Hit]:
    """The kinds of event in one record's text, with their parsed fields, in a fixed order. A record with no
    failure but a Python exception's last line gives ``python_exception`` (a fact: the first-failure rule
    looks for it in a rank's own log)."""
    if "NCCL" not in text and "nccl" not in text:
        if _PLAIN_ANY.search(text) is None:
            return []
        hits: list[Hit] = []
        _failures(text, False, hits)
        if not hits:
            process_end(text, hits)
        return hits
    if " INFO " in text:
        if _INFO_GATE.search(text) is None:
            return []
        facts = info_facts(text)
        if facts is None:
            return []
        if not facts:
            _failures(text, True, facts)
            plugin_failed(text, facts)
        return facts
    hits = []
    nccl_facts(text, hits)
    if "watchdog at work" in text:
        m = _WATCHDOG_WORK.search(text)
        if m:
            hits.append((WATCHDOG_DETECTED, {"seq": int(m[1])}))
    before = len(hits)
    _failures(text, True, hits)
    plugin_failed(text, hits)
    if len(hits) == before:
        if "NCCL WARN" in text:
            hits.append((NCCL_WARN, {}))
        elif is_exception_line(text) or CPP_THROW in text:  # "RuntimeError: NCCL communicator was aborted."
            hits.append((PYTHON_EXCEPTION, {}))
    return hits
