"""Interrupts-off sections: the lrng variant's within stock's order of magnitude.

Each kernel is its variant's irqsoff build (kernel/configs/flavours/irqsoff.config)
booted with the kernel's irqsoff tracer running; task "irqsoff" reads the longest
section with interrupts off while the RNG works (benchlib/commands/irqsoff.py). The 2016
LRNG generated every byte with an HMAC-DRBG under a spinlock with interrupts off;
lrng.drbg_output=1 keeps that path, and is the control: the same check must find
it over ORDER_OF_MAGNITUDE times stock, or the check could not see what it
guards against.

Opt-in (`make irqsoff-test`, or `--irqsoff-kernels` with the kernels built): the
stock irqsoff kernel is a full kernel build, too slow for CI on 2 cores (`make
irqsoff` is the benchmark: several boots, every variant, a report). The parser
and the judgement are tested here on every run.
"""
from __future__ import annotations

from typing import Callable

import pytest

from benchlib.commands import irqsoff
from benchlib.core.errors import BenchError
from benchlib.commands.irqsoff import Section
from benchlib.core.bootrecord import TaskOutput

PROFILE = irqsoff.DEFAULT_PROFILE
# The 2016 path hands out 4 KiB reads whole from the DRBG: the loads that show it.
DRBG_WINDOWS = ("getrandom", "urandom")


@pytest.fixture(scope="module")
def irqsoff_boot(boot_guest, bench_variant) -> Callable[[irqsoff.Kernel], dict[str, Section]]:
    """irqsoff_boot(kernel) -> its windows, from one boot (cached per kernel)."""
    cache: dict[irqsoff.Kernel, dict[str, Section]] = {}

    def _boot(kernel: irqsoff.Kernel) -> dict[str, Section]:
        if kernel not in cache:
            record = boot_guest(PROFILE, tasks=[irqsoff.TASK],
                                variant=bench_variant(kernel.variant) + "+" + irqsoff.FLAVOUR,
                                extra_cmdline=kernel.extra_cmdline)
            cache[kernel] = irqsoff.sections_of(record)
        return cache[kernel]

    return _boot


def kernel(label: str) -> irqsoff.Kernel:
    return next(k for k in irqsoff.KERNELS if k.label == label)


def assert_windows_observed(label: str, windows: dict[str, Section]) -> None:
    """Every load ran to the end and the tracer saw sections in every window:
    a window with nothing in it would compare nothing."""
    for name, section in windows.items():
        assert section.rc == 0, f"{label}: the load of window '{name}' failed (rc={section.rc})"
        assert section.max_us > 0, f"{label}: the tracer saw no section in window '{name}'"


@pytest.mark.irqsoffkernel
def test_irqsoff_lrng_within_an_order_of_magnitude_of_stock(irqsoff_boot) -> None:
    stock, lrng = irqsoff_boot(irqsoff.STOCK), irqsoff_boot(kernel("lrng"))
    assert_windows_observed("stock", stock)
    assert_windows_observed("lrng", lrng)
    found = irqsoff.findings(irqsoff.collect({"stock": [stock], "lrng": [lrng]}))
    assert not found, "\n".join(found)


@pytest.mark.irqsoffkernel
def test_irqsoff_negative_control_drbg_output_is_over_the_order_of_magnitude(irqsoff_boot) -> None:
    control = kernel("lrng drbg_output=1")
    stock, drbg = irqsoff_boot(irqsoff.STOCK), irqsoff_boot(control)
    assert_windows_observed(control.label, drbg)
    # Judged under lrng's label: findings() never judges a reference kernel.
    found = irqsoff.findings(irqsoff.collect({"stock": [stock], "lrng": [drbg]}))
    flagged = {w for w in DRBG_WINDOWS if any(f": {w}: " in line for line in found)}
    assert flagged == set(DRBG_WINDOWS), (
        f"the 2016 output path (lrng.drbg_output=1) was not found over "
        f"{irqsoff.ORDER_OF_MAGNITUDE}x stock in {sorted(set(DRBG_WINDOWS) - flagged)}: "
        + "; ".join(f"{w}: {drbg[w].max_us} us ({drbg[w].where()}) vs stock "
                    f"{stock[w].max_us} us" for w in DRBG_WINDOWS))


# ---- The parser and the judgement, on every run --------------------------------

TRACE = """\
@@SECTION irqsoff {window}
irqsoff: window={window} max_us={us} rc=0
# irqsoff latency trace v1.1.5 on 6.1.0
# --------------------------------------------------------------------
# latency: {us} us, #4/4, CPU#1 | (M:server VP:0, KP:0, SP:0 HP:0 #P:2)
#    -----------------
#    | task: grbench-80 (uid:0 nice:0 policy:0 rt_prio:0)
#    -----------------
#  => started at: lrng_sdrbg_get
#  => ended at:   lrng_sdrbg_get
#
#                    _------=> CPU#
  grbench-80      1d...    0us : _raw_spin_lock_irqsave <-lrng_sdrbg_get
  grbench-80      1d... {us}us : _raw_spin_unlock_irqrestore <-lrng_sdrbg_get
  grbench-80      1d... {us}us : <stack trace>
 => trace_hardirqs_on
 => _raw_spin_unlock_irqrestore
 => lrng_sdrbg_get
 => lrng_cc20_make_state
 => lrng_cc20_get
 => __x64_sys_getrandom
"""


def synthetic(us: dict[str, int]) -> dict[str, list[str]]:
    text = "".join(TRACE.format(window=w, us=us.get(w, 5)) for w in irqsoff.WINDOWS)
    return TaskOutput(irqsoff.TASK, 0, text.splitlines()).sections()


def test_irqsoff_parser_reads_each_window() -> None:
    windows = irqsoff.parse(synthetic({"getrandom": 120}))
    assert set(windows) == set(irqsoff.WINDOWS)
    section = windows["getrandom"]
    assert (section.max_us, section.rc, section.started, section.ended) == (
        120, 0, "lrng_sdrbg_get", "lrng_sdrbg_get")
    assert section.stack[:3] == ("lrng_sdrbg_get", "lrng_cc20_make_state", "lrng_cc20_get"), (
        "the tracer's own frames are dropped from the stack's top")


def test_irqsoff_parser_refuses_a_missing_window() -> None:
    sections = synthetic({})
    del sections["irqsoff reseed"]
    with pytest.raises(BenchError, match="reseed"):
        irqsoff.parse(sections)


@pytest.mark.parametrize("lrng_us, flagged", [(49, False), (51, True)])
def test_irqsoff_findings_flag_over_ten_times_stock(lrng_us: int, flagged: bool) -> None:
    stock = irqsoff.parse(synthetic({w: 5 for w in irqsoff.WINDOWS}))
    lrng = irqsoff.parse(synthetic({"urandom": lrng_us}))
    found = irqsoff.findings(irqsoff.collect({"stock": [stock], "lrng": [lrng]}))
    assert bool(found) == flagged, found
    assert all(": urandom: " in line for line in found), found
