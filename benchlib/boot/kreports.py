"""Reports a kernel writes when it catches itself doing wrong: lockdep, KASAN,
DEBUG_OBJECTS, list debugging, BUG and WARN. Read from the kmsg dump (every
record, by sequence number), never from the console."""
from __future__ import annotations

import re

# The first words of the reports after which a kernel does not go on (a panic) or
# goes on crippled (an oops, a BUG): on the console they end a boot at once
# (benchlib/boot/stages.py); in the kmsg dump they are reports of kind "oops" or "bug".
FATAL_STARTS = ("Kernel panic - not syncing", "Oops: ", "general protection fault", "BUG: ")
# x86's die() header, an oops whatever its cause: "invalid opcode: 0000 [#1] SMP",
# "stack segment: 0000 [#1]" (its error code in 4 hex digits, the oops count).
DIE_HEADER = r"[a-z][a-z ]*: [0-9a-f]{4} \[#\d+\]"


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
    "oops": _starting(FATAL_STARTS[:3]) + "|^" + DIE_HEADER,
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


# What a kernel prints when a CPU or a task stopped making progress. Not a report of
# a bug in itself (a guest starved by a loaded TCG host can print them), so no boot
# fails on one; a test that must see progress (a restored guest) asks stalls().
STALL_STARTS = (r"^watchdog: BUG: soft lockup", r"^watchdog: Watchdog detected hard LOCKUP",
                r"^(rcu: )?INFO: rcu_\w+ detected stalls", r"^INFO: task \S+ blocked for more than")


def stalls(messages: list[tuple[float, str]]) -> list[str]:
    """Every stall warning's first line, as 'time text', in log order."""
    return [f"[{time_s:.6f}] {text}" for time_s, text in messages
            if any(re.search(regex, text) for regex in STALL_STARTS)]


def missing_banners(messages: list[tuple[float, str]]) -> list[str]:
    """The debug checkers whose boot banner is not in the log."""
    return [name for name, regex in DEBUG_BANNERS.items()
            if not any(re.search(regex, text) for _, text in messages)]
