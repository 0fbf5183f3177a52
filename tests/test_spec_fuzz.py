"""No job file, however broken, produces a traceback: validation either returns a spec or raises
SpecError, and the CLI turns that into messages and exit 2."""

from __future__ import annotations

import contextlib
import io
import re
import subprocess
import sys

import yaml
from helpers import JOBS
from hypothesis import given, settings
from hypothesis import strategies as st

from cockpit.cli.main import main
from cockpit.spec.model import JobSpec, SpecError, load_spec, parse_spec

KEYS = ["name", "script", "module", "args", "launcher", "nodes", "gpus", "procs_per_node", "backend",
        "pg_backend", "precision", "seed", "env", "master_port", "rdzv", "max_restarts", "workdir", "python",
        "slurm", "sweep", "grid", "partition", "time", "mem", "requeue", "extra", "NCCL_DEBUG", "bogus"]
scalars = st.one_of(st.none(), st.booleans(), st.integers(-5, 70000), st.floats(allow_nan=True),
                    st.sampled_from(["all", "none", "auto", "ddp", "dp", "nccl", "gloo", "fp16", "bf16",
                                     "local", "ssh", "slurm", "1:30", "n[1-2]", "", "\0", "a\nb"]),
                    st.text(max_size=12))
values = st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                       st.dictionaries(st.sampled_from(KEYS), inner, max_size=5)),
                      max_leaves=20)
documents = st.dictionaries(st.sampled_from(KEYS), values, max_size=10)
EXAMPLES = [j.read_text() for j in JOBS]
SCRIPTS = sorted({load_spec(j).script for j in JOBS} - {None})


def check_no_traceback(text: str) -> None:
    try:
        result = parse_spec(text, "fuzz.yaml")
    except SpecError as exc:
        assert exc.problems and all(line.startswith("fuzz.yaml") for line in exc.lines())
    else:
        assert isinstance(result, JobSpec)


@settings(max_examples=300, deadline=None)
@given(documents)
def test_structured_documents(doc):
    check_no_traceback(yaml.safe_dump(doc, allow_unicode=True))


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=200))
def test_arbitrary_text(text):
    check_no_traceback(text)


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(EXAMPLES), st.integers(0, 10_000), st.integers(0, 40), st.text(max_size=8))
def test_mutated_example_jobs(example, at, cut, insert):
    at %= len(example) + 1
    check_no_traceback(example[:at] + insert + example[at + cut:])


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(EXAMPLES), st.integers(0, 10_000), st.text(max_size=8))
def test_cli_exit_codes(tmp_path_factory, example, at, insert):
    at %= len(example) + 1
    path = tmp_path_factory.mktemp("fuzz") / "job.yaml"
    path.write_text(example[:at] + insert + example[at:], encoding="utf-8")
    for script in SCRIPTS:  # validate checks that a local job's script exists: the examples' do
        (path.parent / script).write_text("")
    err = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        try:
            code = main(["validate", str(path)])
        except SystemExit as exc:
            code = exc.code
    assert code in (0, 2)
    assert "Traceback" not in err.getvalue()
    assert (code == 0) == (err.getvalue() == "")


# -- hostile files, through the real CLI in a capped process ---------------------------------------------------
# Each document carries at least one hostile piece (an alias bomb, a recursive alias, a tag, a huge number, count
# or grid, deep nesting, a file past the size limit), so `cockpit validate` must exit 2 with a positioned line,
# within seconds and 1 GiB of address space, and never with a traceback.

CAPPED = """
import resource, sys
resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))
from cockpit.cli.main import main
sys.exit(main(["validate", sys.argv[1]]))
"""


def _bomb(depth: int, width: int) -> str:
    out = ['  - &b0 "lol"']
    out += [f"  - &b{i} [" + ", ".join([f"*b{i - 1}"] * width) + "]" for i in range(1, depth + 1)]
    return "args:\n" + "\n".join(out) + "\n"


hostile = st.one_of(
    st.tuples(st.integers(5, 40), st.integers(8, 30)).map(lambda t: _bomb(*t)),
    st.sampled_from(["args: &r [a, *r]\n", "env: &e {A: {B: *e}}\n", "sweep: &s {grid: {x: [*s]}}\n"]),
    st.tuples(st.sampled_from(["!!binary aGk=", "!!python/object:os.system", "!!set", "!custom", "!!omap"]),
              st.sampled_from(["env", "slurm", "sweep"])).map(lambda t: f"{t[1]}:\n  {t[0]} X: 1\n"),
    st.sampled_from(["!!binary aGVsbG8=", "!!python/name:os.system", "!!python/object/apply:os.system [id]",
                     "!!set {a}", "!foo bar"]).map(lambda tag: f"env:\n  X: {tag}\n"),
    st.tuples(st.sampled_from(["gpus", "procs_per_node", "seed", "nodes", "max_restarts", "master_port"]),
              st.integers(20, 6000)).map(lambda t: f"{t[0]}: {'9' * t[1]}\n"),
    st.integers(5, 12).map(lambda k: "sweep:\n  grid:\n" + "".join(f"    p{i}: [{','.join('0123456789')}]\n"
                                                                     for i in range(k))),
    st.integers(40, 3000).map(lambda n: "args: " + "[" * n + "]" * n + "\n"),
    st.integers(1, 8).map(lambda mb: "args:\n" + ("  - " + "x" * 1020 + "\n") * (1024 * mb + 1)),
    st.sampled_from(["launcher: slurm\nnodes: gpu[0-99999999999]\n", "launcher: slurm\nnodes: 10000000000\n",
                     'launcher: ssh\nnodes: ["a\\nid"]\n', 'launcher: slurm\nslurm: {modules: ["a;id"]}\n']),
)


@settings(max_examples=25, deadline=None)
@given(st.lists(hostile, min_size=1, max_size=3), st.booleans())
def test_hostile_files_end_fast_in_bounded_memory(tmp_path_factory, pieces, head):
    text = ("name: t\nscript: a.py\n" if head else "") + "".join(pieces)
    path = tmp_path_factory.mktemp("hostile") / "job.yaml"
    path.write_text(text, encoding="utf-8")
    # ends fast: within 20 s whatever the load (its time on a quiet machine is bench material, not a test's)
    r = subprocess.run([sys.executable, "-c", CAPPED, str(path)], capture_output=True, text=True, timeout=20)
    assert r.returncode == 2, r.stderr[-2000:]
    assert "Traceback" not in r.stderr and r.stdout == ""
    assert re.match(rf"^{re.escape(str(path))}(:\d+:\d+)?: ", r.stderr), r.stderr[:500]
