"""How a process's end reads in its log, where no failure rule names it: an exception's last line (of any
type, by its name), libstdc++'s uncaught C++ throw, a shell's or faulthandler's report of a death by signal, a
Slurm step or task that never launched; and an OFI/EFA network plugin that could not start (``diagnose`` calls
it a fallback where NCCL then uses sockets).

Pure and stdlib-only; ``rules.classify`` calls these after its rules found nothing on a record.
"""

from __future__ import annotations

import re

from cockpit.logs.parse.kinds import LAUNCH_FAILED, NET_PLUGIN_FAILED, PROCESS_DIED, PYTHON_EXCEPTION, Hit

_EXC_ENDS = ("Error: ", "Exception: ", "Error:\n", "Interrupt")
CPP_THROW = "terminate called after throwing an instance of"
"""libstdc++'s words for an uncaught C++ exception ('c10::Error', 'std::runtime_error'): the process aborts."""
# A process killed by a signal, as a shell reports it (bash: "./run.sh: line 12:  4242 Killed  python train.py",
# or the bare strsignal() words "Killed", "Segmentation fault (core dumped)") or faulthandler does ("Fatal Python
# error: Segmentation fault"). A fact, not a kind: diagnose makes it a finding (the job failed).
_SIGNAL_WORDS = r"(?:Killed|Segmentation fault|Aborted|Bus error|Floating[ -]point exception|Illegal instruction)"
_SIGNAL_LITERALS = ("Killed", "Segmentation fault", "Aborted", "Bus error", "Floating", "Illegal instruction")
_DIED = re.compile(rf"^{_SIGNAL_WORDS}(?: \(core dumped\))?$|line \d+: +\d+ {_SIGNAL_WORDS}|"
                   rf"Fatal Python error: {_SIGNAL_WORDS}")
# Slurm's own words for a step or task that never started: srun's step_launch.c / srun_job.c ("Task launch for
# %ps failed on node %s: %m", "Unable to create step for job %u: %m"), slurmstepd's exec_task ("execve(): %s: %m").
_NO_LAUNCH = re.compile(r"Task launch for \S+ failed on node|Unable to create step for job|execve\(\): ")
_EXC_BEFORE = frozenset(" :]>|\t")
_EXC_NAME_MAX = 160


def is_exception_line(text: str) -> bool:
    """Whether ``text`` holds a Python traceback's last line: a dotted CamelCase name ending in Error /
    Exception, then ": ", at the start of the text or after a launcher prefix ("[rank1]: RuntimeError: x",
    "0: torch.OutOfMemoryError: ..."). Looks back at most ``_EXC_NAME_MAX`` characters from the first such
    ending: linear."""
    for end_word in _EXC_ENDS:
        at = text.find(end_word)
        if at <= 0:
            continue
        start = at
        floor = max(0, at - _EXC_NAME_MAX)
        while start > floor and (text[start - 1].isalnum() or text[start - 1] in "._"):
            start -= 1
        name = text[start:at]
        if name and (start == 0 or text[start - 1] in _EXC_BEFORE) and name.rsplit(".", 1)[-1][:1].isupper():
            return True
    return False


# aws-ofi-nccl prefixes all its messages "NET/OFI " (include/nccl_ofi_log.h); these say it could not start. NCCL's
# own: "Failed to initialize NET plugin Libfabric", "Plugin load (libnccl-net-ofi.so) returned 2 : ...". A plugin
# that merely is not installed on a machine that asked for none ("No plugin found", libnccl-net.so) is no failure.
_PLUGIN_FAILED = re.compile(
    r"NET/OFI [^\n]{0,200}?(?:[Ff]ail|[Cc]ouldn't|[Cc]ould not|[Uu]nable to|No eligible provider|requires at least)|"
    r"Failed to initialize NET plugin (?:AWS )?(?:Libfabric|OFI)|Plugin load[^\n]{0,200}?(?:ofi|OFI|efa|EFA)")


def plugin_failed(text: str, hits: list[Hit]) -> None:
    """An OFI/EFA network plugin's own failure: ``diagnose`` calls it a fallback where sockets follow."""
    if ("NET/OFI" in text or "lugin" in text) and _PLUGIN_FAILED.search(text):
        hits.append((NET_PLUGIN_FAILED, {}))




def process_end(text: str, hits: list[Hit]) -> None:
    """An exception's last line, a C++ throw, a death by signal or a step that never launched, on a record no
    rule named."""
    if is_exception_line(text) or CPP_THROW in text:
        hits.append((PYTHON_EXCEPTION, {}))
    elif _signal_named(text) and _DIED.search(text.strip()):
        hits.append((PROCESS_DIED, {}))
    elif ("Task launch for" in text or "Unable to create step" in text or "execve(): " in text) \
            and _NO_LAUNCH.search(text):
        hits.append((LAUNCH_FAILED, {}))


def _signal_named(text: str) -> bool:
    """Whether ``text`` holds one of ``_SIGNAL_WORDS`` (each of ``_DIED``'s ways holds one): a few substring
    tests in C before the regex, which tries its three ways at every place (~8 us on a 300-character record,
    most of classifying a training line that a warning hard-wrapped onto)."""
    return any(word in text for word in _SIGNAL_LITERALS)
