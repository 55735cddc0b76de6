"""Suspend to RAM and back: every kernel under test must reseed its RNG on the way
back, before user space reads again.

The guest (init task "suspend") writes `mem` to /sys/power/state; the host sees the
domain suspended (ACPI S3) and wakes it (libvirt's dompmwakeup); the variant's clone
trace set shows the reseeds, placed between the guest's two /dev/kmsg marks
(benchlib/checks/resume.py). 6.1 and the crng series reseed from their PM notifier; the
lrng series does since its patch 0022, and did not before it (the check was seen
red on that kernel). Hibernation needs a swap device these guests do not have: not
tested here.
"""
from __future__ import annotations

import time

import libvirt
import pytest

from benchlib.boot.guest import Guest
from benchlib.checks import resume
from benchlib.core import variants

# Ready at once in every variant (the reseed on resume waits for readiness).
PROFILE = "tcg-virtio-rng"
WAIT_BOOT_S = 300
# How long the host waits for the domain to reach the suspended state after the
# guest says it suspends (the kernel freezes tasks and devices first).
SUSPEND_WAIT_S = 60
POLL_S = 0.2


def wake_when_suspended(guest: Guest) -> None:
    """Wait for the guest's word, then for its domain to be suspended, and wake it."""
    guest.wait_for("@@SECTION suspending", WAIT_BOOT_S)
    deadline = time.monotonic() + SUSPEND_WAIT_S
    while guest.dom.state()[0] != libvirt.VIR_DOMAIN_PMSUSPENDED:
        if time.monotonic() > deadline:
            pytest.fail(f"{guest.ready.name}: the domain was not suspended within "
                        f"{SUSPEND_WAIT_S} s of the guest's 'mem' write (state "
                        f"{guest.dom.state()}); logs: {guest.ready.outdir}")
        time.sleep(POLL_S)
    guest.dom.pMWakeup(0)


def test_resume_from_suspend_reseeds_the_rng(boot_guest, variant: str) -> None:
    record = boot_guest(PROFILE, tasks=["probe", "suspend"], variant=variant,
                        trace=variants.load(variant).clone_trace, suspend_to_mem=True, meanwhile=wake_when_suspended)
    reseeds = resume.reseeds_on_resume(record)
    assert reseeds, (f"{variant}: no reseed of the RNG between the suspend and the return "
                     f"to user space: it serves from the state it had before it slept "
                     f"({record.data_log})")
    print(f"\n{variant}: " + ", ".join(f"{e.event}@{e.t:.3f}s cpu{e.cpu}" for e in reseeds))
