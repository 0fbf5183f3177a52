"""runs/.index (cockpit.run.index, cockpit.insight.listing): `cockpit ps` lists a finished run from the runs
directory's one index while the files its entry was made from are the same, and reads the run again (and mends the
index) when a run was added, removed, relaunched after it ended, when the index is corrupt, missing, of another
version or not the caller's, after two listings wrote it at once, and in a runs directory it cannot write.

Real `cockpit` processes over runs directories made here (tests/test_run_summary.py's). That a listing reads an
entry is shown by an entry marked by hand (its launcher replaced, its CRC made again): the mark shows in the table
exactly while the entry is believed."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import REPO, cockpit_env
from test_run_summary import STRAGGLER, cockpit, make_run, reference_json, status
from test_run_summary import runs as summary_runs
from test_run_summary import table as spaced_table

from cockpit.insight import listing
from cockpit.launch import procs
from cockpit.run import index, layout, summary
from cockpit.run.store import write_run_file, write_status

runs = summary_runs  # the same runs directory: six runs of every kind a listing meets, and an unreadable one
SUMMARISED = {"a-ok", "b-gpu", "c-failed", "d-old", "f-unstarted"}  # the fixture's finished runs with an end
MARK = "MARKED"  # a launcher no run has: shown only from a marked entry
LAUNCHER = summary.ROW_FIELDS.index("launcher")


def entries(runs_dir: Path) -> dict[str, index.Entry]:
    """The index's entries that parse (each line's CRC checked), by run name."""
    got = index.read(runs_dir, listing._HEAD)
    assert got is not None, "no usable index"
    return {name: e for name, line in got.items() if (e := index.entry(line)) is not None}


def mark(runs_dir: Path, name: str) -> None:
    """Replace run ``name``'s launcher in its index entry by MARK (a valid line: its CRC made again)."""
    lines = index.read(runs_dir, listing._HEAD)
    e = index.entry(lines[name])
    row = dict(zip(summary.ROW_FIELDS, e.row, strict=True))
    row["launcher"] = MARK
    lines[name] = index.line(name, e.status, e.summary, e.metrics, row, e.forecast)
    index.write(runs_dir, listing._HEAD, lines.values())


def table(runs_dir: Path) -> str:
    """The ps table, its AGE column blanked (test_run_summary's), and runs of spaces as one (an age that gains a
    digit between two listings, the unreadable run's, moves the columns after it)."""
    return re.sub(r" +", " ", spaced_table(runs_dir))


def launcher_of(runs_dir: Path, name: str) -> str:
    [row] = [line for line in table(runs_dir).splitlines() if line.startswith(name + " ")]
    return row.split()[2]


def test_ps_writes_one_index_and_lists_finished_runs_from_it(runs):
    expected_table = table(runs)
    path = runs / layout.INDEX
    st = os.stat(path)
    assert st.st_mode & 0o777 == 0o600 and st.st_uid == os.geteuid()
    got = entries(runs)
    assert set(got) == SUMMARISED  # e-noend (no end yet) and g-broken (unreadable) are read each time
    status_st = os.stat(runs / "a-ok" / layout.STATUS)
    assert got["a-ok"].status == (status_st.st_ino, status_st.st_mtime_ns, status_st.st_size)
    assert got["a-ok"].row[LAUNCHER] == "local"
    assert table(runs) == expected_table
    assert os.stat(path).st_mtime_ns == st.st_mtime_ns  # nothing changed: not written again
    mark(runs, "a-ok")
    assert launcher_of(runs, "a-ok") == MARK  # listed from the index
    assert launcher_of(runs, "b-gpu") == "local"
    assert cockpit("ps", "--json", runs_dir=runs).stdout == reference_json(runs)  # --json prints each whole status


def test_a_run_relaunched_after_it_ended_is_read_again(runs):
    table(runs)
    mark(runs, "a-ok")
    run_dir = runs / "a-ok"
    # relaunched (requeued, resumed): its status.json written again, the run going (its supervisor: this test)
    me = {"pid": os.getpid(), "start": procs.start_time(os.getpid())}
    write_status(run_dir, status("a-ok", 0, state="running", ended=None, exit_code=None, supervisor=me))
    rows = {r["run_id"]: r for r in json.loads(cockpit("ps", "--json", runs_dir=runs).stdout)["runs"]}
    assert rows["a-ok"]["state"] == "running" and rows["a-ok"]["launcher"] == "local"
    assert launcher_of(runs, "a-ok") == "local"
    assert "running" in table(runs).splitlines()[1]
    assert "a-ok" not in entries(runs)  # a run going has no entry
    # and ended again, another way: its new end is listed, and indexed
    write_status(run_dir, status("a-ok", 0, state="failed", exit_code=3, findings=[STRAGGLER]))
    assert cockpit("ps", "--json", runs_dir=runs).stdout == reference_json(runs)
    assert "failed" in table(runs).splitlines()[1]
    st = os.stat(run_dir / layout.STATUS)
    assert entries(runs)["a-ok"].status == (st.st_ino, st.st_mtime_ns, st.st_size)
    mark(runs, "a-ok")
    # rewritten by a writer that keeps no summary, to the same state and length: its identity is still new
    write_run_file(run_dir, layout.STATUS, status("a-ok", 0, state="failed", exit_code=4,
                                                  findings=[STRAGGLER]).to_json())
    assert launcher_of(runs, "a-ok") == "local"
    assert cockpit("ps", "--json", runs_dir=runs).stdout == reference_json(runs)


def test_a_run_added_or_removed_is_in_the_index_next(runs):
    first = table(runs)
    make_run(runs, "h-new", status("h-new", 7, state="stopped", exit_code=1))
    assert cockpit("ps", "--json", runs_dir=runs).stdout == reference_json(runs)
    assert "h-new" in entries(runs)
    assert "h-new" in table(runs)
    shutil.rmtree(runs / "h-new")
    shutil.rmtree(runs / "c-failed")
    assert cockpit("ps", "--json", runs_dir=runs).stdout == reference_json(runs)
    assert set(entries(runs)) == SUMMARISED - {"c-failed"}
    assert table(runs).splitlines() == [line for line in first.splitlines() if not line.startswith("c-failed")]


def test_metrics_or_a_summary_changed_since_make_the_entry_stale(runs):
    table(runs)
    mark(runs, "a-ok")
    mark(runs, "b-gpu")
    with layout.metrics_file(runs / "a-ok", 0).open("a") as f:
        f.write(json.dumps({"step": 40, "time": 1_700_000_200.0, "total_steps": 40}) + "\n")
    (runs / "b-gpu" / layout.SUMMARY).write_text("{")  # corrupt: read the slow way, made again
    assert launcher_of(runs, "a-ok") == "local" and launcher_of(runs, "b-gpu") == "local"
    assert cockpit("ps", "--json", runs_dir=runs).stdout == reference_json(runs)
    assert json.loads((runs / "b-gpu" / layout.SUMMARY).read_text())["forecast"]["gpus"] == 4
    assert entries(runs)["a-ok"].forecast[listing._FORECAST_FIELDS.index("steps_done")] == 40


def _garbage(path: Path) -> None:
    path.write_bytes(b"\x00\xff not an index \n" * 50)


def _truncated(path: Path) -> None:
    data = path.read_bytes()
    at = data.index(b"\na-ok\t") + 40
    path.write_bytes(data[:at])  # cut in a-ok's line: the lines before it are whole, the rest gone


def _bad_crc(path: Path) -> None:
    lines = path.read_bytes().split(b"\n")
    i = next(i for i, line in enumerate(lines) if line.startswith(b"a-ok\t"))
    lines[i] = lines[i].replace(f'"{MARK}"'.encode(), f'"{MARK.lower()}"'.encode())  # its CRC left as it was
    path.write_bytes(b"\n".join(lines))


def _foreign(path: Path) -> None:
    head, rest = path.read_bytes().split(b"\n", 1)
    data = json.loads(head)
    path.write_bytes(json.dumps({**data, "version": data["version"] + 1}).encode() + b"\n" + rest)


def _other_row(path: Path) -> None:
    head, rest = path.read_bytes().split(b"\n", 1)
    data = json.loads(head)
    path.write_bytes(json.dumps({**data, "row": data["row"][::-1]}, separators=(",", ":")).encode() + b"\n" + rest)


def _symlink(path: Path) -> None:
    target = path.parent.parent / "elsewhere-index"
    target.write_bytes(path.read_bytes())
    path.unlink()
    path.symlink_to(target)


def _not_mine(path: Path) -> None:
    os.chown(path, 65534, 65534)


def _directory(path: Path) -> None:
    path.unlink()
    path.mkdir()


@pytest.mark.parametrize("damage", [Path.unlink, lambda p: p.write_bytes(b""), _garbage, _truncated, _bad_crc,
                                    _foreign, _other_row, _symlink, _not_mine, _directory],
                         ids=["missing", "empty", "garbage", "truncated", "bad-crc", "foreign-version",
                              "other-row", "symlink", "not-mine", "directory"])
def test_a_missing_corrupt_foreign_or_untrusted_index_is_rebuilt(runs, damage):
    if os.geteuid() != 0 and damage is _not_mine:
        pytest.skip("chown to another user needs root")
    expected_table, expected_json = table(runs), reference_json(runs)
    mark(runs, "a-ok")
    mark(runs, "b-gpu")
    path = runs / layout.INDEX
    damage(path)
    if damage in (_bad_crc, _truncated):  # that line is no entry; the whole ones before it still are
        assert launcher_of(runs, "a-ok") == "local"
        assert launcher_of(runs, "b-gpu") == MARK if damage is _bad_crc else True
        assert table(runs).replace(MARK, "local") == expected_table
    else:
        assert table(runs) == expected_table  # no entry believed
    assert cockpit("ps", "--json", runs_dir=runs).stdout == expected_json
    if damage is _directory:  # not ours to remove: listed the slow way each time
        assert path.is_dir()
        return
    assert path.is_file() and not path.is_symlink() and os.stat(path).st_uid == os.geteuid()
    assert set(entries(runs)) == SUMMARISED
    assert table(runs).replace(MARK, "local") == expected_table


def test_listings_at_once_lose_no_run_and_a_lost_entry_comes_back(runs):
    expected_json = reference_json(runs)
    (runs / layout.INDEX).unlink(missing_ok=True)
    procs = [subprocess.Popen([sys.executable, "-m", "cockpit", "ps", *(["--json"] if i % 2 else []),
                               "--runs-dir", str(runs)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True, cwd=REPO, env=cockpit_env(NO_COLOR="1")) for i in range(6)]
    outs = [p.communicate(timeout=120) for p in procs]
    assert all(p.returncode == 0 for p in procs), [err for _, err in outs]
    assert [out for i, (out, _) in enumerate(outs) if i % 2] == [expected_json] * 3
    assert set(entries(runs)) == SUMMARISED  # one of them renamed last: a whole index, every line sound
    assert not list(runs.glob(f".{layout.INDEX}.*"))  # no temporary left behind
    # the six made each run's summary.json at once, each replacing the others': an entry stamped with a summary
    # another listing replaced after is stale (and read again, rightly); one quiet listing settles them all
    assert cockpit("ps", "--json", runs_dir=runs).stdout == expected_json
    # a writer that had not seen a run (it renamed its index last): that run is read again and added back
    lines = index.read(runs, listing._HEAD)
    del lines["c-failed"]
    index.write(runs, listing._HEAD, lines.values())
    mark(runs, "a-ok")
    assert cockpit("ps", "--json", runs_dir=runs).stdout == expected_json
    assert set(entries(runs)) == SUMMARISED
    assert launcher_of(runs, "a-ok") == MARK  # the others' entries were kept as they were


def test_a_runs_directory_not_the_callers_is_listed_without_an_index(runs):
    expected_table, expected_json = table(runs), reference_json(runs)
    (runs / layout.INDEX).unlink()
    os.chmod(runs, 0o777)  # writable by others: cockpit writes nothing of its own into it
    try:
        assert cockpit("ps", "--json", runs_dir=runs).stdout == expected_json
        assert table(runs) == expected_table
        assert not (runs / layout.INDEX).exists()
    finally:
        os.chmod(runs, 0o700)


@contextlib.contextmanager
def _tmpfs(path: Path):
    path.mkdir()
    got = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m,mode=0700", "tmpfs", str(path)],
                         capture_output=True, text=True)
    if got.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {got.stderr.strip()}")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


def test_a_read_only_runs_directory_is_listed_with_or_without_its_index(tmp_path):
    with _tmpfs(tmp_path / "runs") as runs:
        make_run(runs, "a-ok", status("a-ok", 0))
        make_run(runs, "b-gpu", status("b-gpu", 1), job="local-gpus.yaml", total=None)
        make_run(runs, "c-old", status("c-old", 2, state="failed", exit_code=1), older=True)
        subprocess.run(["mount", "-o", "remount,ro", str(runs)], check=True)
        expected_json = reference_json(runs)  # (reads only)
        first = table(runs)  # no index, no summary forecasts, none can be written: worked out each time
        assert cockpit("ps", "--json", runs_dir=runs).stdout == expected_json
        assert not (runs / layout.INDEX).exists()
        assert table(runs) == first
        subprocess.run(["mount", "-o", "remount,rw", str(runs)], check=True)
        assert table(runs) == first  # writes the index
        assert set(entries(runs)) == {"a-ok", "b-gpu", "c-old"}
        mark(runs, "a-ok")
        subprocess.run(["mount", "-o", "remount,ro", str(runs)], check=True)
        assert launcher_of(runs, "a-ok") == MARK  # an index that cannot be written is still read
        assert cockpit("ps", "--json", runs_dir=runs).stdout == expected_json


def test_a_listing_takes_each_line_from_the_index_it_opened(runs):
    """index.lines (what a listing holds: an offset per run, not its line) gives read's lines, each once, from the
    file it opened, though the index is replaced meanwhile (as a listing at the same time replaces it)."""
    table(runs)
    whole = index.read(runs, listing._HEAD)
    assert whole and all(index.entry(line) is not None for line in whole.values())
    with index.lines(runs, listing._HEAD) as kept:
        assert kept is not None and kept.left() == len(whole)
        index.write(runs, listing._HEAD, [])  # replaced by an empty index: the one opened is still read
        assert {name: kept.take(name) for name in whole} == whole
        assert kept.take(next(iter(whole))) is None and kept.take("no-such-run") is None and kept.left() == 0
    table(runs)  # the empty index: every run read the slow way, and the index made again
    assert index.read(runs, listing._HEAD) == whole


def test_a_run_made_again_under_its_name_or_its_status_removed_or_edited_in_place_is_read_again(runs):
    """Behind the index's back (issue 29): a run directory removed and made again under the same name (another
    run, its own files), a status.json removed from a run directory that is still there, and a status.json edited
    in place (the same file, not replaced: a hand edit, another tool) to another state. Each marked entry is not
    believed: each run is listed as list_runs reads it now, and its entry made again or dropped."""
    table(runs)
    for name in ("a-ok", "b-gpu", "c-failed"):
        mark(runs, name)
    shutil.rmtree(runs / "a-ok")
    make_run(runs, "a-ok", status("a-ok", 0, state="stopped", exit_code=1), steps=5)
    (runs / "b-gpu" / layout.STATUS).unlink()
    edited = runs / "c-failed" / layout.STATUS
    before = os.stat(edited)
    text = edited.read_text().replace('"exit_code": 1', '"exit_code": 7')
    with open(edited, "r+") as f:  # in place: the same inode
        f.write(text)
        f.truncate()
    assert os.stat(edited).st_ino == before.st_ino
    assert cockpit("ps", "--json", runs_dir=runs).stdout == reference_json(runs)
    shown = table(runs)
    assert MARK not in shown
    [a_row] = [line for line in shown.splitlines() if line.startswith("a-ok ")]
    assert " stopped " in a_row
    assert not any(line.startswith("b-gpu ") for line in shown.splitlines())  # no status: no run (as list_runs)
    got = entries(runs)
    assert "b-gpu" not in got
    for name in ("a-ok", "c-failed"):
        st = os.stat(runs / name / layout.STATUS)
        assert got[name].status == (st.st_ino, st.st_mtime_ns, st.st_size)
    c_row = dict(zip(summary.ROW_FIELDS, got["c-failed"].row, strict=True))
    assert c_row["exit_code"] == 7 and c_row["launcher"] == "local"
