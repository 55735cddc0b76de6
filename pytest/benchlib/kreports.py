"""Reports a kernel writes when it catches itself doing wrong: lockdep, KASAN,
DEBUG_OBJECTS, list debugging, BUG and WARN. Read from the kmsg dump (every
record, by sequence number), never from the console."""
from __future__ import annotations

import re

# The first words of the reports after which a kernel does not go on (a panic) or
# goes on crippled (an oops, a BUG): on the console they end a boot at once
# (benchlib/stages.py); in the kmsg dump they are reports of kind "oops" or "bug".
FATAL_STARTS = ("Kernel panic - not syncing", "Oops: ", "general protection fault", "BUG: ")


def _starting(words: tuple[str, ...]) -> str:
    return "^(?:" + "|".join(re.escape(w) for w in words) + ")"


# The first line of each kind of report (the lines after it are its body).
# The more specific kinds come first: the first that matches names the report.
REPORT_STARTS = {
    "kasan": r"^BUG: KASAN: |^KASAN: ",
    "sleep-in-atomic": r"^BUG: (sleeping function called from invalid context|scheduling while atomic)",
    "lockdep": r"^WARNING: (possible circular locking dependency|possible recursive locking|"
               r"inconsistent lock state|suspicious RCU usage|bad unlock balance|"
               r"lock held when returning|held lock freed)|^INFO: (possible irq lock inversion|"
               r"trying to register non-static key)",
    "debugobjects": r"^ODEBUG: ",
    "list": r"^list_(add|del) corruption",
    "oops": _starting(FATAL_STARTS[:3]),
    "warn": r"^WARNING: CPU: \d+ PID: \d+ at ",
    "bug": _starting(FATAL_STARTS[3:]),
}
# What a debug kernel prints at boot when each checker is really on: a debug test
# that does not see them proves nothing.
DEBUG_BANNERS = {
    "lockdep": r"^Lock dependency validator: Copyright",
    "kasan": r"KernelAddressSanitizer initialized",   # after the "kasan: " prefix
}


def reports(messages: list[tuple[float, str]]) -> list[str]:
    """Every report's first line, as 'kind: time text', in log order."""
    found = []
    for time_s, text in messages:
        for kind, regex in REPORT_STARTS.items():
            if re.search(regex, text):
                found.append(f"{kind}: [{time_s:.6f}] {text}")
                break
    return found


def missing_banners(messages: list[tuple[float, str]]) -> list[str]:
    """The debug checkers whose boot banner is not in the log."""
    return [name for name, regex in DEBUG_BANNERS.items()
            if not any(re.search(regex, text) for _, text in messages)]
