"""cockpit.slurm.hostlist: Slurm hostlist expansion, checked against cockpit.spec.formats.hostlist_count on
generated lists."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cockpit.slurm.hostlist import MAX_HOSTS, HostlistError, expand
from cockpit.spec.formats import hostlist_count


@pytest.mark.parametrize("text,hosts", [
    ("node01", ["node01"]),
    ("node[01-04,07],login1", ["node01", "node02", "node03", "node04", "node07", "login1"]),
    ("n[8-11]", ["n8", "n9", "n10", "n11"]),
    ("n[08-11]", ["n08", "n09", "n10", "n11"]),
    ("r[1-2]n[1-2]", ["r1n1", "r1n2", "r2n1", "r2n2"]),
    ("gpu[1-2]-ib", ["gpu1-ib", "gpu2-ib"]),
    ("a,b[3],c", ["a", "b3", "c"]),
    ("127.0.1.[1-3]", ["127.0.1.1", "127.0.1.2", "127.0.1.3"]),
])
def test_expand(text, hosts):
    assert expand(text) == hosts


@pytest.mark.parametrize("text", ["", "n[", "n[1-]", "n[3-1]", "n[a-b]", "n[1-2", "a b", ",", "n[0-999999999]"])
def test_malformed(text):
    with pytest.raises(HostlistError):
        expand(text)


def test_too_many_hosts_fails_fast():
    with pytest.raises(HostlistError, match=str(MAX_HOSTS)):
        expand("a[0-999]b[0-999]")


_name = st.from_regex(r"[a-z][a-z0-9-]{0,5}", fullmatch=True)
_range = st.tuples(st.integers(0, 40), st.integers(0, 5), st.integers(1, 3)).map(
    lambda t: f"{t[0]:0{t[2]}d}-{t[0] + t[1]:0{t[2]}d}" if t[1] else f"{t[0]:0{t[2]}d}")
_part = st.tuples(_name, st.lists(st.lists(_range, min_size=1, max_size=3), max_size=2)).map(
    lambda t: t[0] + "".join("[" + ",".join(g) + "]x" for g in t[1]))


@given(st.lists(_part, min_size=1, max_size=4).map(",".join))
def test_expansion_agrees_with_the_spec_counter(text):
    hosts = expand(text)
    assert len(hosts) == hostlist_count(text)
    assert all("[" not in h and "," not in h for h in hosts)
