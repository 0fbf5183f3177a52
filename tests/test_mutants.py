"""The mutation check (tests/bench/mutate.py, run by hand like a benchmark) stays usable: every mutant's patch
still applies to cockpit/ exactly once, changes something, and names tests that exist. A refactor that
moves a mutated line fails here, at once, instead of leaving a 'stale' mutant for the next person to find."""

from __future__ import annotations

import importlib.util
import sys

import pytest
from helpers import REPO

SPEC = importlib.util.spec_from_file_location("mutate", REPO / "tests" / "bench" / "mutate.py")
mutate = importlib.util.module_from_spec(SPEC)
sys.modules["mutate"] = mutate  # dataclasses look their module up while the class is made
SPEC.loader.exec_module(mutate)


def test_the_mutants_are_the_core_decisions():
    names = {m.name for m in mutate.MUTANTS}
    assert len(names) == len(mutate.MUTANTS) >= 7
    for part in ("straggler", "culprit", "first-failure", "reconcile", "stall-clock", "preflight", "compose"):
        assert any(part in n for n in names), part


@pytest.mark.parametrize("mutant", mutate.MUTANTS, ids=lambda m: m.name)
def test_each_mutant_applies_once_and_names_real_tests(mutant):
    assert mutate.applies(mutant, REPO) is None
    assert mutant.old != mutant.new and mutant.path.startswith("cockpit/")
    for target in mutant.tests:
        assert (REPO / target.split("::")[0]).exists(), target
