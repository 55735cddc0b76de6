"""Stock 6.1 (or a user's --kernel): what early user space sees of the RNG.

Semantics only: orders of events in one kernel log, who blocks, what is
credited. Timing numbers belong to the report (`make run`), not here.
"""
from __future__ import annotations

import statistics

import pytest

from benchlib.record import BootRecord, kmsg_position

READY = "random: crng init done"
# printk and user space race by this much at most when one CPU makes the CRNG
# ready (the state flips before the message is printed) and another observes it.
RACE_SLACK_S = 0.5


# Stock behaviour comes from the stock variant, and from the crng variant booted
# with random.crng_mode=stock (A/B runs with one build); --kernel replaces both.
STOCK_KERNELS = {"stock": {}, "crng-stock-mode": {"variant": "crng",
                                                  "extra_cmdline": "random.crng_mode=stock"}}


@pytest.fixture(scope="module", params=list(STOCK_KERNELS))
def stock_kernel(request, kernel_under_test) -> dict[str, str]:
    """boot_guest arguments that give a kernel with stock 6.1 RNG behaviour."""
    if kernel_under_test[0] == "custom":
        if request.param != "stock":
            pytest.skip("--kernel given: only the user's kernel is tested")
        return {}
    return STOCK_KERNELS[request.param]


@pytest.fixture(scope="module")
def quiet_probe(boot_guest, stock_kernel) -> BootRecord:
    """tcg-quiet, probe with the EINTR child first and then a blocking child."""
    return boot_guest("tcg-quiet", tasks=["probe"], params={"probe": "bi"}, **stock_kernel)


def test_stock_nonblock_eagain_until_crng_init_done(quiet_probe: BootRecord) -> None:
    first = quiet_probe.probe_event("nonblock_first")
    ok = quiet_probe.probe_event("nonblock_ok")
    assert first and first["errno"] == "EAGAIN", f"early GRND_NONBLOCK did not fail: {first}"
    assert ok, f"GRND_NONBLOCK never succeeded (log: {quiet_probe.data_log})"
    ready_index, ready_t = kmsg_position(quiet_probe, READY)
    # Attempts 1..eagain failed; the marker is written before each attempt, so the
    # last failing attempt's marker must precede the readiness message.
    last_fail = int(ok["eagain"])
    fail_index, fail_t = kmsg_position(quiet_probe, f"bench: nonblock attempt {last_fail}")
    assert fail_index < ready_index, (
        f"attempt {last_fail} got EAGAIN at {fail_t} s after '{READY}' at {ready_t} s")
    _, ok_t = kmsg_position(quiet_probe, "bench: nonblock ok")
    assert ok_t >= ready_t - RACE_SLACK_S, (
        f"GRND_NONBLOCK succeeded at {ok_t} s, before '{READY}' at {ready_t} s")


def test_stock_blocking_getrandom_returns_when_ready(quiet_probe: BootRecord) -> None:
    blocking = quiet_probe.probe_event("blocking")
    assert blocking, f"the blocking child did not report (log: {quiet_probe.data_log})"
    assert blocking["ret"] == "32" and blocking["errno"] == "0", blocking
    start_index, start_t = kmsg_position(quiet_probe, "bench: blocking attempt 1")
    ready_index, ready_t = kmsg_position(quiet_probe, READY)
    assert start_index < ready_index, (
        f"the blocking call started at {start_t} s, after the CRNG was ready at {ready_t} s: "
        "it tested nothing")
    _, return_t = kmsg_position(quiet_probe, "bench: blocking returned 32")
    assert return_t >= ready_t - RACE_SLACK_S, (
        f"blocking getrandom() returned at {return_t} s, before '{READY}' at {ready_t} s")


def test_stock_blocking_getrandom_interrupted_by_signal(quiet_probe: BootRecord) -> None:
    eintr = quiet_probe.probe_event("eintr")
    assert eintr, f"the EINTR child did not report (log: {quiet_probe.data_log})"
    assert eintr["ready_before"] == "0", "the CRNG was already ready: nothing to interrupt"
    assert (eintr["ret"], eintr["errno"]) == ("-1", "EINTR"), eintr


def ready_times(boot_guest, profile: str, boots: int,
                kernel: dict[str, str]) -> tuple[list[float], list[BootRecord]]:
    records = [boot_guest(profile, tasks=["probe", "hwrng"], params={"probe": "b"}, **kernel)
               for _ in range(boots)]
    times = []
    for record in records:
        t = record.milestone("crng init done")
        assert t is not None, f"{record.name}: no '{READY}' ({record.console_log})"
        times.append(t)
    return times, records


def test_stock_virtio_rng_makes_crng_ready_earlier(boot_guest, request, stock_kernel) -> None:
    boots = request.config.getoption("--boots")
    quiet, _ = ready_times(boot_guest, "tcg-quiet", boots, stock_kernel)
    virtio, records = ready_times(boot_guest, "tcg-virtio-rng", boots, stock_kernel)
    for record in records:
        current = record.task("hwrng").lines[0].strip()
        assert current.startswith("virtio_rng"), f"{record.name}: current hwrng is '{current}'"
    assert statistics.median(virtio) < statistics.median(quiet), (
        f"ready at median {statistics.median(virtio):.3f} s with virtio-rng, "
        f"{statistics.median(quiet):.3f} s without (boots: {virtio} vs {quiet})")
