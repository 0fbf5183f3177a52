"""Fix and relaunch from the run view: `F` opens the review (the finding, its evidence, the diff of the job
file), `r` writes the fixed job file next to the original and relaunches through the context's launcher, and
the new run opens; escape cancels without writing. With an 80x24 snapshot of the review."""

from __future__ import annotations

from pathlib import Path

from tui.tuidata import FAILED_LOGS, NOW, make_run, until

from cockpit.fleet.records import Interface
from cockpit.insight.proposals import FixContext
from cockpit.run.store import read_status, write_status
from cockpit.spec.model import load_spec
from cockpit.tui.app import CockpitApp
from cockpit.tui.screens.fix import FixScreen
from cockpit.tui.screens.run_view import RunViewScreen

LOG = (Path(__file__).parent / "fixtures" / "gloo-nosuch0" / "rank-0.node0.log").read_text()
JOB = "# demo, wrong interface\nname: demofx\nscript: demo.py\nenv:\n  GLOO_SOCKET_IFNAME: nosuch0  # typo?\n"
FACTS = FixContext(frozenset(), ("node0",), {"node0": [Interface("lo", up=True, loopback=True, ipv4=("127.0.0.1/8",)),
                                               Interface("eth0", up=True, ipv4=("10.0.0.5/24",), virtual=False)]})


def failed_run(ctx) -> tuple[Path, Path]:
    run_dir = make_run(ctx.runs_dir, "demofx", "failed", NOW - 600, logs={"rank-0.node0.log": LOG})
    job = Path("jobs/job.yaml")  # relative to the test's working directory (tmp): the same on every machine
    job.parent.mkdir()
    job.write_text(JOB)
    status = read_status(run_dir)
    status.job_file = str(job)
    write_status(run_dir, status)
    return run_dir, job


async def open_review(pilot, run_dir: Path) -> FixScreen:
    app = pilot.app
    app.open_run(run_dir)
    await until(pilot, lambda: isinstance(app.screen, RunViewScreen))
    await pilot.press("F")
    await until(pilot, lambda: isinstance(app.screen, FixScreen) and app.screen.plan is not None,
                what="the fix review")
    return app.screen


async def test_review_then_r_writes_the_fixed_file_and_relaunches_it(ctx):
    run_dir, job = failed_run(ctx)
    new_run = make_run(ctx.runs_dir, "demofx", "running", NOW - 5)
    launched: list[tuple[Path, Path]] = []
    ctx.relaunch = lambda path, runs: launched.append((path, runs)) or new_run
    ctx.fix_facts = lambda _run: FACTS
    app = CockpitApp(ctx)
    async with app.run_test(size=(100, 30)) as pilot:
        review = await open_review(pilot, run_dir)
        text = str(review.query_one("#fix-text").content)
        assert "+  GLOO_SOCKET_IFNAME: eth0  # typo?" in text and "evidence: " in text and "nosuch0" in text
        await pilot.press("r")
        await until(pilot, lambda: isinstance(app.screen, RunViewScreen) and app.screen.run_dir == new_run,
                    what="the new run's view")
    fixed = job.with_name("job.fixed.yaml")
    assert launched == [(fixed, ctx.runs_dir)]
    assert dict(load_spec(fixed).env) == {"GLOO_SOCKET_IFNAME": "eth0"}
    assert job.read_text() == JOB


async def test_escape_cancels_without_writing(ctx):
    run_dir, job = failed_run(ctx)
    ctx.relaunch = lambda path, runs: (_ for _ in ()).throw(AssertionError("must not launch"))
    ctx.fix_facts = lambda _run: FACTS
    app = CockpitApp(ctx)
    async with app.run_test(size=(100, 30)) as pilot:
        await open_review(pilot, run_dir)
        await pilot.press("escape")
        await until(pilot, lambda: isinstance(app.screen, RunViewScreen) and app.screen.run_dir == run_dir)
    assert sorted(p.name for p in job.parent.iterdir()) == ["job.yaml"]


async def test_a_cause_in_the_code_offers_no_relaunch(ctx):
    """The demo's rank 1 raised; rank 0's gloo "Connection closed by peer" only lost its peer (issue 26): the
    review says there is no configuration fix, and r relaunches nothing."""
    run_dir = make_run(ctx.runs_dir, "demo", "failed", NOW - 600, logs=FAILED_LOGS)
    job = Path("jobs/demo.yaml")
    job.parent.mkdir()
    job.write_text("name: demo\nscript: demo.py\n")
    status = read_status(run_dir)
    status.job_file = str(job)
    write_status(run_dir, status)
    ctx.relaunch = lambda path, runs: (_ for _ in ()).throw(AssertionError("must not launch"))
    ctx.fix_facts = lambda _run: FACTS
    app = CockpitApp(ctx)
    async with app.run_test(size=(100, 30)) as pilot:
        review = await open_review(pilot, run_dir)
        text = str(review.query_one("#fix-text").content)
        assert text.startswith("no configuration fix: the cause is in the code (rank 1 raised RuntimeError: "
                               "injected failure on rank 1 after step 5"), text
        assert review.plan.new_text is None and "GLOO_SOCKET_IFNAME" not in text
        await pilot.press("r")
        await pilot.pause()
        assert isinstance(app.screen, FixScreen)  # still the review: nothing was written or launched
    assert sorted(p.name for p in job.parent.iterdir()) == ["demo.yaml"]


def test_review_snapshot(snap_compare, ctx):
    run_dir, _ = failed_run(ctx)
    ctx.fix_facts = lambda _run: FACTS

    async def show(pilot):
        await open_review(pilot, run_dir)
        await pilot.app.workers.wait_for_complete()
        await pilot.pause()
    assert snap_compare(CockpitApp(ctx), terminal_size=(80, 24), run_before=show)
