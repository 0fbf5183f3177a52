"""What NCCL's own INFO lines say: channels and transports, networks, interfaces, init, version.

Pure and stdlib-only; ``rules.classify`` calls ``info_facts`` for every ``NCCL INFO`` line that passed
its gate, and ``nccl_facts`` (version, NCCL_SOCKET_IFNAME) for NCCL's other lines too.
"""

from __future__ import annotations

import re

from cockpit.logs.parse.kinds import (
    NCCL_BOOTSTRAP,
    NCCL_CHANNEL,
    NCCL_INIT_COMPLETE,
    NCCL_INIT_START,
    NCCL_NETWORK,
    NCCL_SOCKET_IFNAME,
    NCCL_VERSION,
    Hit,
)

# Some patterns below start with a word that must begin at a word boundary. A leading ``\\b`` would stop
# ``re`` from looking for the word as a literal first (5-10x slower per search: an Init line took ~9 us), so
# they leave it out and ``_word_search`` checks the boundary. Not for patterns that run to the end of the line
# (``_USING_NETWORK``, ``_BOOTSTRAP``): a match tried at every non-boundary "Using" would make that quadratic.
_CHAIN = re.compile(r"\.(?:cc|cu|c|h|cpp|hpp):\d+ -> \d+")
_CHANNEL = re.compile(
    r"(?:Channel|Ring) \d+(?:/\d+)? : (\d+)(?:\[[0-9a-fA-Fx]+\])? -> (\d+)(?:\[[0-9a-fA-Fx]+\])?"
    r"(?: \[(send|receive)\])? via (\S+(?: shared memory| pointer)?)")
_NUM_PART = re.compile(r"\d+(?:\(\d+\))?")
_NET_USING = re.compile(r"NET/(\w+)\s*:?\s*Using\b")
_USING_NETWORK = re.compile(r"\bUsing (?:internal )?[Nn]etwork (\S[^\n]*)")  # to the end: linear
_BOOTSTRAP = re.compile(r"\bBootstrap\s*: Using (\S[^\n]*)")
_OLD_NET_IFACE = re.compile(r"NET : Using interface (\S+)")
_SIDEBAND = re.compile(r"Using interface ([\w.\-]+) for sideband")
_OOB = re.compile(r"OOB ([\w.\-]+):")
_LISTED_IFACE = re.compile(r"\[\d+\]([\w.\-]+):")
_INIT = re.compile(r"Init (START|COMPLETE)\b")
_INIT_RANK = re.compile(r"rank (\d+)")
_INIT_NRANKS = re.compile(r"n[Rr]anks (\d+)")
_INIT_DEV = re.compile(r"cudaDev (\d+)")
_INIT_BUS = re.compile(r"busId ([0-9a-fA-F]+)")
_IFNAME = re.compile(r"NCCL_SOCKET_IFNAME(?: set by environment to | set to |\s*[=:]\s*['\"]?|': ')"
                     r"([\^=]?[\w.\-]+(?:,[\w.\-]+)*)")
_VERSION = re.compile(r"NCCL version:?\s*v?(\d+\.\d+\.\d+)")

# NCCL network names (as in "Using network X" / "NET/X : Using") -> ours. Unknown plugins keep their name.
_NETWORKS = (("ib", "IB"), ("socket", "Socket"), ("aws libfabric", "OFI"), ("libfabric", "OFI"),
             ("ofi", "OFI"))
_NOT_NETWORKS = frozenset({"plugin"})


def _word_search(pattern: re.Pattern[str], text: str) -> re.Match[str] | None:
    """``pattern.search(text)`` as if the pattern began with ``\\b`` (it begins with a word character)."""
    pos = 0
    while (m := pattern.search(text, pos)) is not None:
        at = m.start()
        if at == 0 or not (text[at - 1].isalnum() or text[at - 1] == "_"):
            return m
        pos = at + 1
    return None


def network_name(raw: str) -> str | None:
    """Map an NCCL network name to "IB" / "Socket" / "OFI"; other plugins keep their first word."""
    name = raw.strip().rstrip(".")
    low = name.lower()
    if not low or low.split()[0] in _NOT_NETWORKS:
        return None
    for prefix, ours in _NETWORKS:
        if low.startswith(prefix):
            return ours
    return name.split()[0]


def _interfaces(listing: str) -> tuple[tuple[str, ...], str | None]:
    """Interface names and the first address in "[0]eth0:10.0.0.1<0> [1]ib0:..." or "bond0:10.1.1.1<0>"."""
    names: list[str] = []
    address = None
    for token in listing.split():
        token = token.split("]", 1)[1] if token.startswith("[") and "]" in token else token
        name, sep, rest = token.partition(":")
        if sep and name and "<" in rest:
            names.append(name)
            address = address or rest.split("<", 1)[0]
    return tuple(names), address


def _channel(text: str) -> Hit | None:
    m = _CHANNEL.search(text)
    if not m:
        return None
    local = m[2] if m[3] == "receive" else m[1]
    via = m[4]
    if via.startswith("direct shared memory"):
        transport = "SHM"
    else:
        transport = "/".join(p for p in via.split("/") if not _NUM_PART.fullmatch(p))
    fields: dict[str, object] = {"rank": int(local), "transport": transport}
    parts = transport.split("/")
    if parts[0] == "NET" and len(parts) > 1:
        fields["network"] = network_name(parts[1])
    return NCCL_CHANNEL, fields


def _network_hits(text: str, hits: list[Hit]) -> None:
    m = _word_search(_NET_USING, text) if "NET/" in text else None
    if m:  # "NET/Plugin : Using internal network plugin." names no network
        net = network_name(m[1])
        if net:
            oob = _word_search(_OOB, text)
            side = _SIDEBAND.search(text)
            if oob or side:
                ifaces: tuple[str, ...] = ((oob or side)[1],)  # type: ignore[index]
            elif net == "IB":
                ifaces = ()
            else:
                ifaces = tuple(_LISTED_IFACE.findall(text))
            hits.append((NCCL_NETWORK, {"network": net, "interfaces": ifaces}))
        return
    m = _USING_NETWORK.search(text) if "etwork " in text else None
    if m:
        net = network_name(m[1].rstrip())
        if net:
            hits.append((NCCL_NETWORK, {"network": net}))
        return
    m = _BOOTSTRAP.search(text) if "Bootstrap" in text else _word_search(_OLD_NET_IFACE, text)
    if m:
        names, address = _interfaces(m[1])
        if names:
            hits.append((NCCL_BOOTSTRAP, {"interface": names[0], "interfaces": names, "address": address}))


def _init_hit(text: str, hits: list[Hit]) -> None:
    m = _word_search(_INIT, text)
    if not m:
        return
    fields: dict[str, object] = {}
    for key, pattern in (("rank", _INIT_RANK), ("nranks", _INIT_NRANKS), ("cuda_dev", _INIT_DEV)):
        found = _word_search(pattern, text)
        if found:
            fields[key] = int(found[1])
    bus = _word_search(_INIT_BUS, text)
    if bus:
        fields["bus_id"] = bus[1]
    hits.append((NCCL_INIT_COMPLETE if m[1] == "COMPLETE" else NCCL_INIT_START, fields))


def nccl_facts(text: str, hits: list[Hit]) -> None:
    """Version and NCCL_SOCKET_IFNAME, wherever NCCL or PyTorch prints them."""
    if "version" in text:
        m = _VERSION.search(text)
        if m:
            hits.append((NCCL_VERSION, {"version": m[1]}))
    if "NCCL_SOCKET_IFNAME" in text:
        m = _IFNAME.search(text)
        if m:
            hits.append((NCCL_SOCKET_IFNAME, {"interface": m[1]}))


def info_facts(text: str) -> list[Hit] | None:
    """The facts of an ``NCCL INFO`` line (channel, network, bootstrap, init, version, NCCL_SOCKET_IFNAME);
    None for a return-code chain (``x.cc:12 -> 3``), which says nothing the WARN above it did not."""
    if " via " in text:
        channel = _channel(text)
        if channel:
            return [channel]
    if " -> " in text and _CHAIN.search(text):
        return None
    hits: list[Hit] = []
    if "Using" in text:
        _network_hits(text, hits)
    if "Init " in text:
        _init_hit(text, hits)
    nccl_facts(text, hits)
    return hits
