"""Stock 6.1 (or a user's --kernel): what early user space sees of the RNG.

Semantics only: orders of events in one kernel log, who blocks, what is
credited. Timing numbers belong to the report (`make run`), not here.
"""
from __future__ import annotations

import statistics

import pytest

from benchlib.core import profiles
from benchlib.checks import trace, wakes
from benchlib.checks.ordering import (assert_nonblock_eagain_until_ready, blocking_return_time,
                                      ready_position)
from benchlib.core.profiles import Needs
from benchlib.core.bootrecord import BootRecord
from benchlib.core.variants import CUSTOM

READY = "random: crng init done"
# The probe's wakes and the jitter generator's timer, traced (benchlib/checks/wakes.py).
WAKES_TRACE = "stock-wakes"
# Blocked readers run the jitter loop a second past readiness: late on purpose.
LATEJITTER = "test-stock-latejitter"
QUIET = profiles.QUIET.one()
VIRTIO = Needs(virtio_rng=True, hyperv=False, numa_nodes=1).one()


# Stock behaviour comes from the stock variant, and from the crng variant booted
# with random.crng_mode=stock (A/B runs with one build); --kernel replaces both.
STOCK_KERNELS = {"stock": {}, "crng-stock-mode": {"variant": "crng",
                                                  "extra_cmdline": "random.crng_mode=stock"}}


@pytest.fixture(scope="module", params=[
    name if name == "stock" else pytest.param(name, marks=pytest.mark.benchkernels)
    for name in STOCK_KERNELS])
def stock_kernel(request, kernel_under_test) -> dict[str, str]:
    """boot_guest arguments that give a kernel with stock 6.1 RNG behaviour; with
    --kernel, the user's (the crng variant's case is then deselected)."""
    if kernel_under_test.label == CUSTOM:
        return {}
    return STOCK_KERNELS[request.param]


def probe_boot(boot_guest, **fields: object) -> BootRecord:
    """A quiet profile, probe with the EINTR child first and then a blocking child."""
    return boot_guest(QUIET, tasks=["probe"], params={"probe": "bi"}, **fields)


@pytest.fixture(scope="module")
def quiet_probe(boot_guest, stock_kernel) -> BootRecord:
    return probe_boot(boot_guest, **stock_kernel)


def ready(record: BootRecord) -> tuple[int, float]:
    return ready_position(record, lambda text: text == READY, READY)


def test_stock_nonblock_eagain_until_crng_init_done(quiet_probe: BootRecord) -> None:
    first = quiet_probe.probe_event("nonblock_first")
    assert first and first["errno"] == "EAGAIN", f"early GRND_NONBLOCK did not fail: {first}"
    assert_nonblock_eagain_until_ready(quiet_probe, ready(quiet_probe), READY)


def test_stock_blocking_getrandom_returns_when_ready(quiet_probe: BootRecord) -> None:
    blocking_return_time(quiet_probe, ready(quiet_probe), READY)


@pytest.fixture(scope="module")
def traced_quiet_probe(boot_guest, stock_kernel) -> BootRecord:
    """quiet_probe's boot with the probe's wakes and the jitter timer traced."""
    return probe_boot(boot_guest, trace=WAKES_TRACE, **stock_kernel)


def assert_blocking_returns_at_ready(record: BootRecord) -> str:
    """A blocking getrandom() that began before readiness returned at it: not before
    (the kernel log's order), not after (it did not sleep on past the ready message,
    and its jitter loop stopped there). Says how it waited."""
    at = ready(record)
    blocking_return_time(record, at, READY)
    woken = wakes.assert_not_woken_after_ready(record, at[1], READY)
    polled = wakes.assert_jitter_stopped_at_ready(record, at[1], READY)
    return (f"{polled} jitter timer calls before '{READY}'; "
            + (f"last woken at {woken.t:.6f} s by {wakes.waker(woken)}" if woken
               else "never woken: it polled"))


def test_stock_blocking_getrandom_returns_at_ready_not_later(traced_quiet_probe) -> None:
    print(f"\n{assert_blocking_returns_at_ready(traced_quiet_probe)}")


@pytest.mark.benchkernels
def test_stock_negative_control_latejitter_returns_late(boot_guest) -> None:
    """Blocked readers that run the jitter loop a second past readiness on purpose:
    the check from above must fail, where the one from below passes."""
    record = probe_boot(boot_guest, trace=WAKES_TRACE, variant=LATEJITTER)
    blocking_return_time(record, ready(record), READY)
    with pytest.raises(AssertionError, match="jitter loop ran on past"):
        assert_blocking_returns_at_ready(record)


def test_stock_blocking_getrandom_interrupted_by_signal(quiet_probe: BootRecord) -> None:
    eintr = quiet_probe.probe_event("eintr")
    assert eintr, f"the EINTR child did not report (log: {quiet_probe.data_log})"
    assert eintr["ready_before"] == "0", "the CRNG was already ready: nothing to interrupt"
    assert (eintr["ret"], eintr["errno"]) == ("-1", "EINTR"), eintr


def ready_times(boot_guest, profile: str, boots: int, kernel: dict[str, str],
                **fields: object) -> tuple[list[float], list[BootRecord]]:
    records = [boot_guest(profile, tasks=["probe", "hwrng"], params={"probe": "b"},
                          **kernel, **fields) for _ in range(boots)]
    times = []
    for record in records:
        t = record.milestone("crng init done")
        assert t is not None, f"{record.name}: no '{READY}' ({record.console_log})"
        times.append(t)
    return times, records


# A trace set of the hardware RNG's input (fixtures/trace-hwrng).
HWRNG_TRACE = "hwrng"


def test_stock_virtio_rng_feeds_the_crng(boot_guest, request, stock_kernel) -> None:
    """With virtio-rng, the hw_random core feeds the RNG bits it credits, in every
    boot, seen in the trace (add_hwgenerator_randomness with entropy > 0). When the
    RNG became ready beside the quiet profile's is a figure, printed, not a verdict:
    a kernel's own jitter entropy may be ready before the virtio-rng driver loads
    (Debian's generic 6.1.0-57: 3.247 s with virtio-rng, 3.242 s without)."""
    boots = request.config.getoption("--boots")
    quiet, _ = ready_times(boot_guest, QUIET, boots, stock_kernel)
    virtio, records = ready_times(boot_guest, VIRTIO, boots, stock_kernel, trace=HWRNG_TRACE)
    for record in records:
        current = record.finished_task("hwrng").lines[0].strip()
        assert current.startswith("virtio_rng"), f"{record.name}: current hwrng is '{current}'"
        sections = record.task(trace.TRACE_TASK).sections()
        blind = trace.blind_spots(sections, ["hwrng"])
        assert not blind, f"{record.name}: {blind} ({record.data_log})"
        credited = [e for e in trace.trace_of(sections)
                    if e.event == "hwrng" and e.int("entropy") > 0]
        assert credited, (f"{record.name}: virtio-rng is the current hwrng, but it never gave "
                          f"the RNG a credited input ({record.data_log})")
    print(f"\nready (median printk s): {statistics.median(virtio):.3f} with virtio-rng, "
          f"{statistics.median(quiet):.3f} without (boots: {virtio} vs {quiet})")
