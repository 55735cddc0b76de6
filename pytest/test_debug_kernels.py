"""Debug kernels: every variant built with kernel/configs/flavours/debug.config
(VARIANT+debug: lockdep, KASAN, DEBUG_OBJECTS, atomic-sleep checks, WARN/BUG on).

A guest runs getrandom() readers pinned to CPU 0 and to CPU 1 and takes CPU 1
offline and online again while they read (task "hotplug"); the kernel log, read
whole from the kmsg dump, must hold no lockdep, KASAN, BUG or WARN report. The
checkers' boot banners must be there: a log without reports from a kernel that had
no checkers would prove nothing.

Opt-in (`make debug-test`, or `--debug-kernels` with the VARIANT+debug kernels
built): each KASAN build is a full kernel build, too slow for CI on 2 cores. The
report scanner itself is tested here on every run.
"""
from __future__ import annotations

import re

import pytest

from benchlib.boot.kreports import missing_banners, reports
from benchlib.core.profiles import Needs
from benchlib.core.variants import known_variants

# virtio-rng makes every variant ready at once: the readers read, never wait.
PROFILE = Needs(virtio_rng=True, hyperv=False, numa_nodes=1).one()
FLAVOUR = "debug"
# KASAN and lockdep under TCG: boots and readers run several times slower.
DEBUG_TIMEOUT_S = 180
MIN_HOTPLUG_ROUNDS = 3
HOTPLUG_LINE = re.compile(r"hotplug: rounds=(\d+) readers_rc=(\d+),(\d+) online=(\S+)")
READER_LINE = re.compile(r"^reader: .*calls=(\d+)")


@pytest.mark.debugkernel
@pytest.mark.parametrize("base", known_variants())
def test_debug_kernel_hotplug_under_getrandom_reports_nothing(bench_variant, boot_guest,
                                                              base: str) -> None:
    kernel = f"{bench_variant(base)}+{FLAVOUR}"
    record = boot_guest(PROFILE, tasks=["hotplug"], variant=kernel,
                        timeout_s=DEBUG_TIMEOUT_S, fail_on_reports=False)
    task = record.finished_task("hotplug")
    sections = task.sections()
    summary = next((HOTPLUG_LINE.search(line) for line in sections.get("hotplug", [])
                    if HOTPLUG_LINE.search(line)), None)
    assert summary, f"{kernel}: no hotplug summary in {record.data_log}"
    assert int(summary.group(1)) >= MIN_HOTPLUG_ROUNDS, f"{kernel}: {summary.group(0)}"
    assert summary.group(4) == "0-1", f"{kernel}: CPU 1 did not come back: {summary.group(0)}"
    assert summary.group(2, 3) == ("0", "0"), (
        f"{kernel}: a getrandom() reader failed across the hotplug: {summary.group(0)}")
    for cpu in ("cpu0", "cpu1"):
        calls = [int(m.group(1)) for line in sections.get(f"readers {cpu}", [])
                 if (m := READER_LINE.search(line))]
        assert calls and all(c > 0 for c in calls), (
            f"{kernel}: the reader pinned to {cpu} did not read: {calls} ({record.data_log})")
    assert not missing_banners(record.messages), (
        f"{kernel}: not a debug kernel: no boot banner of {missing_banners(record.messages)}")
    found = reports(record.messages)
    assert not found, f"{kernel}: {len(found)} report(s) in the kernel log:\n" + "\n".join(found)


def test_debug_report_scanner_finds_each_kind() -> None:
    """The scanner the debug test relies on: each kind of report is found and named,
    ordinary messages are not reports, and a missing banner is named."""
    log = [(0.1, "Lock dependency validator: Copyright (c) 2006 Red Hat, Inc., Ingo Molnar"),
           (0.2, "random: crng init done"),
           (0.3, "WARNING: CPU: 1 PID: 42 at drivers/char/random.c:123 crng_make_state+0x1/0x2"),
           (0.4, "BUG: KASAN: slab-out-of-bounds in extract_entropy+0x10/0x20"),
           (0.5, "WARNING: possible circular locking dependency detected"),
           (0.6, "BUG: sleeping function called from invalid context at mm/slub.c:1"),
           (0.7, "ODEBUG: free active (active state 0) object type: timer_list"),
           (0.8, "list_add corruption. prev->next should be next")]
    kinds = [line.split(":", 1)[0] for line in reports(log)]
    assert kinds == ["warn", "kasan", "lockdep", "sleep-in-atomic", "debugobjects", "list"]
    assert missing_banners(log) == ["kasan"]
