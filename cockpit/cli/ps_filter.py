"""`cockpit ps` filters, in the spellings squeue and docker users already type (the options and their argparse types:
cockpit.cli.ps_options). They act on the listing's rows (cockpit.insight.listing): no run directory is read again to
filter.

Name and age need nothing a run may change, so they act first (and a run they leave out is never worked out again);
the state acts after a run still going was worked out again (its supervisor may have died: running -> lost), and
``--last`` after everything, on what is left.
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from cockpit.insight.listing import Listed


@dataclass(frozen=True)
class RunFilter:
    """What `ps` was asked to keep; every field None/empty: everything."""

    states: frozenset[str] | None = None
    names: tuple[str, ...] = ()
    since: float | None = None  # time.time() value: runs created at or after it
    last: int | None = None  # the newest N of what the others keep

    @classmethod
    def from_args(cls, args) -> RunFilter:
        chosen: set[str] = set()
        for group in getattr(args, "state", None) or ():
            chosen |= group
        names = tuple(n for text in getattr(args, "name", None) or () for n in text.split(",") if n)
        return cls(frozenset(chosen) or None, names, getattr(args, "since", None), getattr(args, "last", None))

    @property
    def active(self) -> bool:
        return bool(self.states or self.names or self.since is not None or self.last is not None)

    @property
    def needs_rows(self) -> bool:
        """Whether the listing must keep each run's row (its name and state), not only its path."""
        return bool(self.states or self.names)

    def early(self, listed: list[Listed]) -> list[Listed]:
        """Keep the runs of the wanted names and ages (nothing about them changes when a run is worked out again)."""
        return [item for item in listed
                if (self.since is None or item.created >= self.since)
                and (not self.names or (item.status is not None and self._named(item.status.name,
                                                                                 item.status.run_id)))]

    def late(self, listed: list[Listed]) -> list[Listed]:
        """Keep the runs in the wanted states, then the newest ``last`` of them (listed oldest first)."""
        kept = [item for item in listed if not self.states or (item.status is not None
                                                                and item.status.state in self.states)]
        return kept[-self.last:] if self.last else kept

    def _named(self, name: str, run_id: str) -> bool:
        """A glob (``demo*``) matched against the job's name and the run id, or a plain word: the name, or part of
        the run id."""
        return any(fnmatch.fnmatchcase(name, p) or fnmatch.fnmatchcase(run_id, p)
                   or (not any(c in p for c in "*?[") and p in run_id) for p in self.names)

    def said(self) -> str:
        """The filters as the user would type them again, for "no runs match ..."."""
        parts = [f"--state {','.join(sorted(self.states))}"] if self.states else []
        parts += [f"--name {n}" for n in self.names]
        if self.since is not None:
            from datetime import datetime

            parts.append(f"--since {datetime.fromtimestamp(self.since).isoformat(' ', 'seconds')}")
        return " ".join(parts)
