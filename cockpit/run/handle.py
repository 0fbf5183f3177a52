"""A run as one value: its directory and the status.json it was read with (as submitit's Job is bound to its
folder). Handed down instead of a bare Path, so a diagnosis reads status.json once and sees one state while the
supervisor keeps writing; a follower's next look is a new value (``reread``), visibly."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from cockpit.run.status import RunStatus


@dataclass(frozen=True)
class Run:
    dir: Path
    status: RunStatus | None  # None: no status.json yet, or it cannot be read (store.load_status says why)

    @classmethod
    def load(cls, run_dir: Path) -> Run:
        """The run at ``run_dir``, its status.json read now (cockpit.run.store.read_status)."""
        from cockpit.run.store import read_status

        return cls(run_dir, read_status(run_dir))

    def reread(self) -> Run:
        """The same run, its status.json read again."""
        return Run.load(self.dir)

    @property
    def id(self) -> str:
        return self.status.run_id if self.status is not None else self.dir.name
