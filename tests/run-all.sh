#!/usr/bin/env bash
# Installs everything the test suite needs on a fresh Debian/Ubuntu machine, then runs it.
#   bash tests/run-all.sh [pytest args...]
# System packages: shellcheck (generated scripts are checked), openssh-server (real sshd on loopback for
# the SSH tests), slurmctld + slurmd + slurm-client + munge (a real Slurm started by the Slurm tests),
# tmux (the TUI in a real terminal), iproute2 (`ip netns`: the multinode tests' namespaced hosts).
# Python: torch pinned to 2.13.0, numpy, and cockpit itself with its test extras (pytest, pytest-timeout: every
# test's time bound, ...) and the `fast` extra (hyperscan:
# the parser's tests run both its paths, with the scanner and with the stdlib gate). The pin is the CPU build
# where pip's config offers a local +cpu wheel (this project's machines); from the public index it is the CUDA
# build: there, first `pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu` (README).
set -euo pipefail
cd "$(dirname "$0")/.."

SUDO=""
[ "$(id -u)" = 0 ] || SUDO="sudo"
APT_PACKAGES=(shellcheck openssh-server slurmctld slurmd slurm-client munge tmux iproute2 valgrind)
missing=()
for pkg in "${APT_PACKAGES[@]}"; do
  dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg")
done
if [ "${#missing[@]}" -gt 0 ]; then
  echo "== apt-get install ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi

PY="${PYTHON:-python3}"
echo "== pip install (torch==2.13.0 CPU, cockpit[test,fast])"
"$PY" -m pip install -q --disable-pip-version-check "torch==2.13.0" numpy -e ".[test,fast]"

echo "== pytest"
# Two workers (pytest-xdist): most tests wait on real processes (ranks, sshd, Slurm, stall detection), so two
# at a time fill the machine's 2 cores; tests that share one Slurm, one network-namespace lab, one sshd world
# or the throwaway users run in one worker (tests/conftest.py: xdist_group).
exec "$PY" -m pytest -n 2 --dist loadgroup "$@"
