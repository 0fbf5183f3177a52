"""No job file, however broken, produces a traceback: validation either returns a spec or raises
SpecError, and the CLI turns that into messages and exit 2."""

from __future__ import annotations

import contextlib
import io

import yaml
from helpers import JOBS
from hypothesis import given, settings
from hypothesis import strategies as st

from cockpit.cli import main
from cockpit.spec import JobSpec, SpecError, parse_spec

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
    err = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        try:
            code = main(["validate", str(path)])
        except SystemExit as exc:
            code = exc.code
    assert code in (0, 2)
    assert "Traceback" not in err.getvalue()
    assert (code == 0) == (err.getvalue() == "")
