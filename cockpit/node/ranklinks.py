"""The rank hook's companion that writes the rank's own transport evidence when it answers a stacks request:
where no agent of cockpit's runs on the rank's node (a Slurm job), the rank reads its own sockets. Installed
as ``<run>/hook/cockpit_ranklinks.py`` beside the hook (cockpit.node.rankhook), with cockpit_linkread.py and
cockpit_ifaces.py (cockpit.node.linkread, cockpit.node.ifaces), and imported by the hook only when a request
comes: nothing of this runs, and nothing is imported, until asked. Stdlib only.

``logs/rank-R.HOST.links``, written atomically (a temporary file renamed), one JSON object:

    {"req": "<the dump request answered>", "lreq": "<the links request answered>",
     "raw": <cockpit.node.linkread.link_read's record for this rank alone>}

(either request null where none came yet): one record answers both, as a stall's stacks request and the
slow-link watch's links request may come in the same second.

For an nccl job (COCKPIT_PG_BACKEND), the node's first rank (LOCAL_RANK 0) also asks NCCL's RAS service at
its NCCL_RAS_ADDR (cockpit_rasask.py: cockpit.node.rasask; at most ~6 s, quiet when none listens) when it
answers a stacks request, into ``raw["ras"]``.

read back by cockpit.hang.ranklinks (the Slurm launcher's gather). Bounded: link_read keeps the rank's own
rows of /proc/self/net/tcp{,6} (each read capped at 1 MiB) and runs `ss` with a 3 s timeout; the record is
cut to LINKS_MAX_BYTES (the `ss` text first, then the /proc rows) so a rank with thousands of sockets still
writes a file its reader takes.
"""

import json
import os

try:  # shipped: beside this file in <run>/hook/
    import cockpit_ifaces as ifaces
    import cockpit_linkread as linkread
    import cockpit_rasask as rasask
except ImportError:  # imported as part of cockpit
    from cockpit.node import ifaces, linkread, rasask

LINKS_MAX_BYTES = 4 << 20  # what cockpit.hang.ranklinks reads of one file


def links_record(host: str, rank: int, pid: int, request: str | None, links_request: str | None = None) -> dict:
    """This rank's record for the requests: its sockets, the node's interfaces and IB ports."""
    raw = linkread.link_read(host, {rank: pid}, ifaces.interfaces())
    target = rasask.ras_target() if request is not None else None  # nccl: the stacks request only, not the watch
    if target and os.environ.get("LOCAL_RANK", "0") == "0":  # one rank per node asks; RAS's view is the job's
        raw["ras"] = rasask.ras_ask(target)
    record = {"req": request, "lreq": links_request, "raw": raw}
    if len(json.dumps(record)) > LINKS_MAX_BYTES:
        raw["ss"] = None  # the /proc rows stand in (cockpit.hang.transport_raw)
        raw["truncated"] = True
    if len(json.dumps(record)) > LINKS_MAX_BYTES:
        for entry in raw["ranks"]:
            entry["tcp"] = entry["tcp6"] = None
    return record


def write_links(base: str, pid: int, request: str | None, links_request: str | None = None) -> None:
    """``base``.links for the requests, atomically (base: <run>/logs/rank-R.HOST, as the hook names its files).
    A read that fails writes {"req", "lreq", "error"} instead: the reader says why this rank has no evidence."""
    name = os.path.basename(base)
    rank_text, _, host = name[len("rank-"):].partition(".")
    try:
        record = links_record(host, int(rank_text), pid, request, links_request)
    except Exception as exc:  # noqa: BLE001 - said in the file, for `cockpit stacks` to show
        record = {"req": request, "lreq": links_request, "error": f"{type(exc).__name__}: {exc}"[:500]}
    tmp = f"{base}.links.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(json.dumps(record, separators=(",", ":")) + "\n")
    os.replace(tmp, base + ".links")
