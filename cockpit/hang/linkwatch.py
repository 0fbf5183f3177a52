"""The slow-link watch: while a run is slow, gather the kernel's view of its connections (twice: RTT is judged
over two samples, cockpit.hang.linkfind) and, where one node's link is slow, say that the ranks' wait is network.

When. A gather is asked for while the run shows a slow sign (``signs``): the straggler rule suspects a rank (a
candidate, before it is confirmed), the run's step rate fell to at most SLOWED of the best it had (or to less
than two steps a window), or the ranks spend at least WAITING of their time in collectives. A sign that was not
there at the last pair starts a pair at once (at most every PAIR_MIN_GAP_S); while the same signs hold, a pair
is made after PAIR_EVERY_S, then twice as long after each pair that found nothing, up to PAIR_EVERY_MAX_S (a
healthy gloo run on CPUs waits most of its time: it shows a sign all along). Nothing is gathered while no sign
shows, while the run starts or while it is stalled (the stall has its own gather).

Cost, bounded: a pair is two gathers PAIR_GAP_S apart, run in a thread of its own so the watchdog's looks go
on; at most one pair per PAIR_MIN_GAP_S, and in steady state one per PAIR_EVERY_MAX_S. One gather is, per node, one
SSH command (the agent reads /proc and runs `ss` once: cockpit.launch.ssh.links), and on a local run a read of
the ranks' /proc entries and one `ss` here. Measured cost is in README.md (slow link).

What. The pair goes to link_finding (the same rule as the stall's: slow sockets whose one common node is seen
slow by at least two others); a slow_link names that node, and the finding (``network_finding``) is a
straggler finding whose cause is the network: "rank 1 (node2)'s wait is network: its connections run at 0.9
Mbit/s with 180 ms RTT, the others' at 0.2 ms". It stands until a later pair finds no slow link, or until no
sign has shown for CLEAR_S. A healthy run gets no finding: nothing is 10x slower than the rest.
"""

from __future__ import annotations

import statistics
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from cockpit.hang.linkfind import LinkFinding, link_finding
from cockpit.hang.transport import TransportGather
from cockpit.run.progress import RankProgress

SLOWED = 0.5  # the median rank's step rate at most half the best it had over a window
WAITING = 0.5  # the median rank waits at least half its time in collectives
PAIR_GAP_S = 3.0  # between the two gathers of a pair: RTT over two samples, bytes acked between them
PAIR_MIN_GAP_S = 15.0  # a new sign starts a pair at once, but not more often than this
PAIR_EVERY_S = 60.0  # while a sign holds: the first wait, doubled after each pair that found nothing
PAIR_EVERY_MAX_S = 960.0
CLEAR_S = 30.0  # no sign this long: the run is not slow any more, a link finding it had goes
Sign = str  # "suspect" | "slowed" | "waiting"
Links = Callable[[], "TransportGather | None"]


def signs(ranks: Mapping[int, RankProgress], best_rate: float | None, suspect: bool) -> frozenset[Sign]:
    """The run's slow signs now. ``best_rate``: the best median step rate seen so far (None: none yet)."""
    out = {"suspect"} if suspect else set()
    running = [r for r in ranks.values() if r.state != "exited"]
    rates = [r.rate for r in running if r.rate is not None]
    rate = statistics.median(rates) if rates else 0.0 if running else None  # no rate: under 2 steps a window
    if rate is not None and best_rate and rate <= SLOWED * best_rate:
        out.add("slowed")
    waits = [r.wait for r in ranks.values() if r.wait is not None and r.state != "exited"]
    if waits and statistics.median(waits) >= WAITING:
        out.add("waiting")
    return frozenset(out)


def due(now: float, now_signs: frozenset[Sign], last_pair: float | None, last_signs: frozenset[Sign],
        every: float = PAIR_EVERY_S) -> bool:
    """Whether a pair of gathers starts now (see the module docstring)."""
    if not now_signs:
        return False
    if last_pair is None:
        return True
    since = now - last_pair
    return since >= every or (bool(now_signs - last_signs) and since >= PAIR_MIN_GAP_S)


@dataclass(frozen=True)
class Pair:
    """Two gathers of the same run PAIR_GAP_S apart; ``began``/``ended``: wall time."""

    first: TransportGather
    second: TransportGather
    began: float
    ended: float


def slow_link(pair: Pair) -> LinkFinding | None:
    """The pair's slow_link finding (None: no node's link is slow; a dead link is the stall's to say)."""
    f = link_finding(pair.second.nodes, {**pair.first.addr_to_node, **pair.second.addr_to_node},
                     earlier=[pair.first.nodes], job_iface=pair.second.job_iface or pair.first.job_iface)
    return f if isinstance(f, LinkFinding) and f.kind == "slow_link" else None


class LinkWatch:
    """Asks for pairs of gathers when ``due`` (in a thread: ``links()`` may take seconds over SSH) and keeps the
    last pair's slow link. ``look`` is called by the watchdog once a look; it never blocks on a gather."""

    def __init__(self, links: Links, clock: Callable[[], float] = time.time, gap: float = PAIR_GAP_S):
        self.links, self.clock, self.gap = links, clock, gap
        self.best_rate: float | None = None
        self.last_pair: float | None = None  # when the last pair began
        self.last_signs: frozenset[Sign] = frozenset()
        self.last_sign: float | None = None  # when a sign last showed
        self.slow_since: float | None = None  # when the signs began, this time
        self.found: tuple[LinkFinding, Pair, float] | None = None  # the slow link, its pair, the slow signs' start
        self.errors: list[str] = []
        self.pairs = self.gathers = 0
        self.every = PAIR_EVERY_S  # the wait for the next pair while the signs stay the same
        self.gather_s: float | None = None  # how long the last gather took
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def look(self, ranks: Mapping[int, RankProgress], suspect: bool, running: bool) -> None:
        """One look: ``running``: the run trains (not starting, not stalled); ``suspect``: the straggler rule
        has a candidate."""
        now = self.clock()
        rates = [r.rate for r in ranks.values() if r.rate is not None and r.state != "exited"]
        if running and rates:
            self.best_rate = max(self.best_rate or 0.0, statistics.median(rates))
        now_signs = signs(ranks, self.best_rate, suspect) if running else frozenset()
        if now_signs:
            self.slow_since = self.slow_since if self.last_sign is not None else now
            self.last_sign = now
        elif self.last_sign is not None and now - self.last_sign >= CLEAR_S:
            self.last_sign = self.slow_since = None
            with self._lock:
                self.found = None
        busy = self._thread is not None and self._thread.is_alive()
        if not busy and due(now, now_signs, self.last_pair, self.last_signs, self.every):
            again = self.last_pair is not None and not (now_signs - self.last_signs) and self.current() is None
            self.every = min(PAIR_EVERY_MAX_S, 2 * self.every) if again else PAIR_EVERY_S
            self.last_pair, self.last_signs = now, now_signs
            self.pairs += 1
            self._thread = threading.Thread(target=self._pair, args=(self.slow_since or now,), daemon=True,
                                            name="cockpit-linkwatch")
            self._thread.start()

    def said(self) -> dict:
        """What status.json's ``watch`` says of the watch: its cost so far and its last errors."""
        return {"pairs": self.pairs, "gathers": self.gathers, "gather_s": self.gather_s, "every_s": self.every,
                "signs": sorted(self.last_signs), "errors": list(self.errors)}

    def current(self) -> tuple[LinkFinding, Pair, float] | None:
        with self._lock:
            return self.found

    def _pair(self, since: float) -> None:
        began = self.clock()
        first = self._gather()
        if first is None:
            return
        time.sleep(self.gap)  # the second RTT sample: a pacing wait in the gathering thread, not a sync
        second = self._gather()
        if second is None:
            return
        pair = Pair(first, second, began, self.clock())
        found = slow_link(pair)
        with self._lock:
            self.found = None if found is None else (found, pair, since)

    def _gather(self) -> TransportGather | None:
        began = time.monotonic()
        try:
            return self.links()
        except Exception as exc:  # noqa: BLE001 - a failed gather is said in status, the watch goes on
            self.errors = [*self.errors[-4:], f"{type(exc).__name__}: {exc}"]
            return None
        finally:
            self.gathers += 1
            self.gather_s = round(time.monotonic() - began, 2)


def send_rates(pair: Pair) -> dict[tuple[str, str, str], float]:
    """Bits per second each socket's acked bytes grew between the pair's gathers, (host, local, peer) -> rate."""
    first = {(n.host, str(s.local), str(s.peer)): (n.taken_at, s) for n in pair.first.nodes for s in n.sockets}
    out = {}
    for n in pair.second.nodes:
        for s in n.sockets:
            t0, s0 = first.get((n.host, str(s.local), str(s.peer)), (None, None))
            if s0 is None or None in (t0, n.taken_at, s0.bytes_acked, s.bytes_acked):
                continue
            dt = float(n.taken_at or 0.0) - float(t0 or 0.0)
            if dt > 0:
                out[(n.host, str(s.local), str(s.peer))] = 8 * max(0, (s.bytes_acked or 0) - (s0.bytes_acked or 0)) / dt
    return out
