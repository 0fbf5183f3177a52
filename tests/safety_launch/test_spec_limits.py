"""Fields that validated and then broke the launch (issue 27, item 7), and the nesting bound whatever libyaml
says (its first paragraph): every pattern is a full-string match, so a name ending in a newline is refused with
file:line, the field and a hint; strings past the kernel's exec limits are refused with the field and the
limit; a file nested too deep gets cockpit's own message even where libyaml refuses it first."""

from __future__ import annotations

import errno
import importlib
import pkgutil
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from helpers import REPO

import cockpit.spec
from cockpit.render import Site, render
from cockpit.spec import argv
from cockpit.spec.model import SpecError, parse_spec
from cockpit.spec.yamlpos import MAX_DEPTH

BASE = "name: t\nscript: train.py\n"
# A value each pattern of cockpit.spec must accept; a new pattern without one fails the walk below.
SAMPLES = {
    "NAME": "demo-1.a_b", "ENV_KEY": "NCCL_DEBUG", "SLURM_TIME": "1-02:03:04", "SLURM_MEM": "64G",
    "HOST": "user@node1:2222", "MODULE": "cuda/12.1", "FLAG": "--lr", "HOSTLIST": "gpu[01-04],login1",
    "_IFNAME_LIKE": "GLOO_IFACE", "_PLAIN": "cuda/12.1",
}
# Patterns that look for a part of a string by design, not at what a whole value may be.
SEARCHES = {"model._SECRET_WORDS": "an env name that contains KEY, TOKEN, ... is masked"}


def spec_patterns() -> list[tuple[str, re.Pattern]]:
    """Every compiled pattern at module level in cockpit.spec."""
    out = []
    for info in pkgutil.iter_modules(cockpit.spec.__path__):
        module = importlib.import_module(f"cockpit.spec.{info.name}")
        out += [(f"{info.name}.{name}", value) for name, value in vars(module).items()
                if isinstance(value, re.Pattern)]
    return out


ALL_PATTERNS = spec_patterns()
PATTERNS = [(name, pattern) for name, pattern in ALL_PATTERNS if name not in SEARCHES]


def errors(text: str, **kw) -> list[str]:
    with pytest.raises(SpecError) as info:
        parse_spec(text, "job.yaml", **kw)
    return info.value.lines()


@pytest.mark.parametrize(("name", "pattern"), PATTERNS, ids=[n for n, _ in PATTERNS])
def test_every_pattern_matches_the_whole_string_only(name, pattern):
    sample = SAMPLES.get(name.split(".", 1)[1])
    assert sample is not None, f"add a sample value for {name} to SAMPLES"
    assert pattern.match(sample) and pattern.fullmatch(sample)
    for bad in (sample + "\n", sample + "\r\n", "\n" + sample, sample + "\n" + sample):
        assert pattern.match(bad) is None and pattern.search(bad) is None, (name, bad)
    if r"\d" in pattern.pattern:  # "١" is a Unicode digit that \d takes unless the pattern is ASCII
        assert pattern.flags & re.ASCII, name


def test_the_walk_sees_the_patterns_that_reach_scripts():
    assert {"formats.NAME", "formats.ENV_KEY", "formats.HOST", "formats.MODULE"} <= {n for n, _ in PATTERNS}
    assert set(SEARCHES) <= {n for n, _ in ALL_PATTERNS}  # an exemption names a pattern that exists


def test_no_expression_in_the_spec_ends_with_a_dollar():
    """`$` matches before a final newline; an inline re.match(r"...$") would bring the bug back."""
    for path in sorted((REPO / "cockpit" / "spec").glob("*.py")):
        assert not re.search(r"""\$["']\s*[,)]""", path.read_text()), f"{path.name}: anchor with \\Z, not $"


def cockpit_validate(tmp_path: Path, text: str) -> subprocess.CompletedProcess:
    (tmp_path / "train.py").write_text("print('hi')\n")
    job = tmp_path / "job.yaml"
    job.write_text(text, encoding="utf-8")
    return subprocess.run([sys.executable, "-m", "cockpit", "validate", str(job)], capture_output=True, text=True,
                          cwd=REPO, timeout=60, env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO)})


@pytest.mark.parametrize(("text", "where"), [
    ('name: "demo\\n"\nscript: train.py\n', ":1:1: name: 'demo\\n' is not a usable job name (hint: "),
    (BASE + 'env:\n  "NCCL_DEBUG\\n": INFO\n', ":4:3: env['NCCL_DEBUG\\n']: 'NCCL_DEBUG\\n' is not a valid "),
    (BASE + 'launcher: ssh\nnodes: ["node1\\n", node2]\n', ":4:9: nodes[0]: 'node1\\n' is not a host name (hint: "),
    (BASE + 'launcher: slurm\nslurm:\n  modules: ["cuda/12.1\\n"]\n',
     ":5:13: slurm.modules[0]: 'cuda/12.1\\n' is not a module name (hint: "),
    (BASE + 'launcher: slurm\nslurm:\n  partition: "gpu\\r"\n',
     ":5:3: slurm.partition: 'gpu\\r' contains the control character '\\r' (hint: "),
    (BASE + 'launcher: slurm\nslurm:\n  extra: ["--exclusive\\u2028--time=1"]\n',
     ":5:11: slurm.extra[0]: '--exclusive\\u2028--time=1' is not an sbatch long option (hint: "),
], ids=["job name", "env name", "ssh host", "slurm module", "partition with CR", "sbatch option with LS"])
def test_a_name_ending_in_a_newline_is_refused_where_it_is(tmp_path, text, where):
    r = cockpit_validate(tmp_path, text)
    assert r.returncode == 2 and r.stdout == "" and "Traceback" not in r.stderr, r.stderr
    assert r.stderr.startswith(f"{tmp_path / 'job.yaml'}{where}"), r.stderr
    assert len(r.stderr.splitlines()) == 1, r.stderr  # the bad character is shown escaped, not printed


def test_a_slurm_time_in_other_digits_is_refused():
    assert "is not a Slurm time limit" in " ".join(errors(BASE + "launcher: slurm\nslurm: {time: \"١٢\"}\n"))


def test_a_valid_slurm_header_still_renders_whole():
    spec = parse_spec(BASE + "launcher: slurm\nnodes: 2\nslurm: {time: \"01:00:00\", modules: [cuda/12.1]}\n")
    text = render(spec, Site(run_dir="/r", run_id="R", workdir="/w"), "sbatch")
    header = [line for line in text.splitlines() if line.startswith("#SBATCH")]
    assert "#SBATCH --job-name=t" in header and "#SBATCH --nodes=2" in header and "#SBATCH --time=01:00:00" in header


def test_a_module_is_a_dotted_python_name():
    assert errors("name: t\nmodule: 'pkg.train; rm -rf ~'\n") == [
        "job.yaml:2:1: module: 'pkg.train; rm -rf ~' is not a Python module name (hint: a dotted name as "
        "`python -m` takes it, e.g. mypkg.train (for a file: script: train.py))"]
    assert parse_spec("name: t\nmodule: pkg.train\n").module == "pkg.train"


# -- the kernel's exec limits -----------------------------------------------------------------------------------
def test_the_limit_is_the_kernels():
    """What validate refuses is what exec refuses: one string of MAX_ARG_STRLEN bytes (with its NUL) passes,
    one byte more fails with E2BIG, as an argument and as NAME=value."""
    fits = "x" * (argv.MAX_ARG_STRLEN - 1)
    assert subprocess.run(["true", fits], timeout=30).returncode == 0
    with pytest.raises(OSError) as info:
        subprocess.run(["true", fits + "x"], timeout=30)
    assert info.value.errno == errno.E2BIG
    with pytest.raises(OSError) as info:
        subprocess.run(["true"], env={"A": "x" * (argv.MAX_ARG_STRLEN - 2)}, timeout=30)
    assert info.value.errno == errno.E2BIG


def test_one_argument_over_the_limit_is_refused_with_the_field_and_the_limit():
    big = "x" * argv.MAX_ARG_STRLEN
    assert errors(BASE + f"args: [--ok, {big}, {big}]\n") == [
        f"job.yaml:3:14: args[1]: this argument is {len(big)} bytes, over the kernel's limit for one argument "
        f"({argv.MAX_ARG_STRLEN - 1} bytes, MAX_ARG_STRLEN): no rank would start ('Argument list too long') "
        "(1 more like it) (hint: pass a large value in a file and give its path)"]


def test_one_env_value_over_the_limit_is_refused():
    value = "é" * (argv.MAX_ARG_STRLEN // 2)  # 2 bytes each in UTF-8: over, though the characters are not
    [line] = errors(BASE + f"env:\n  DATA: {value}\n")
    assert line.startswith(f"job.yaml:4:3: env.DATA: this environment variable is {2 * len(value) + 5} bytes")


def test_a_sweep_value_over_the_limit_is_refused():
    [line] = errors(BASE + "sweep:\n  grid:\n    --lr: [0.1, " + "z" * argv.MAX_ARG_STRLEN + "]\n")
    assert line.startswith("job.yaml:5:17: sweep.grid.--lr[1]: this argument is")


def test_arguments_together_over_arg_max_are_refused():
    """Aliases repeat one big value without making the file big: 30 x 100 KB of arguments."""
    text = BASE + 'args: [&a "' + "y" * 100_000 + '"' + ", *a" * 29 + "]\n"
    [line] = errors(text, arg_max=2 * 1024 * 1024)
    assert line.startswith("job.yaml:3:1: args: the job's arguments and environment take 3000270 bytes;")
    assert "ARG_MAX = 2097152 bytes" in line
    assert parse_spec(text, arg_max=4 * 1024 * 1024).args[29] == "y" * 100_000


def test_this_machines_arg_max_is_used_by_default():
    import os

    assert argv.system_arg_max() == os.sysconf("SC_ARG_MAX")


# -- nesting: cockpit's bound whatever libyaml says -------------------------------------------------------------
DEEP = "args: " + "[" * 5000 + "]" * 5000 + "\n"


def test_deep_nesting_gets_cockpits_message_even_where_libyaml_refuses_first():
    """libyaml refuses the reserved directive (PyYAML's parser does not); from libyaml 0.2.6 it also refuses
    deep brackets on its own, first. Either way the user reads cockpit's bound, at the same place."""
    text = "%FOO bar\n---\n" + BASE + DEEP
    with pytest.raises(yaml.YAMLError):
        list(yaml.parse(text, Loader=yaml.CSafeLoader))
    [line] = errors(text)
    assert line.startswith(f"job.yaml:5:38: args{'[0]' * (MAX_DEPTH - 1)}: nested more than {MAX_DEPTH} levels deep")


def test_a_file_libyaml_alone_refuses_keeps_libyamls_position():
    [line] = errors("%FOO bar\n---\n" + BASE)
    assert line.startswith("job.yaml:1:5: YAML syntax error: ")  # libyaml's own words follow
