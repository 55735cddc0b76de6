"""Interrupt crediting in stock 6.1, observed with kprobe hist triggers in tcg-quiet.

The guest raises a counted number of ttyS0 interrupts (console noise, a byte a
write) with three kprobes armed:
every sampled interrupt (add_interrupt_randomness, by irq), every fast-pool spill
(mix_interrupt_randomness, by fast_pool.count), every credit (_credit_init_bits,
by bits). The credits must equal what 6.1's rule gives for the spills seen, and a
rule that differs for the counts seen (the test insists on spills large enough to
tell count/64 from 1 bit a spill) would fail it.
"""
from __future__ import annotations

import pytest

from benchlib.checks.credit import check_credit_rule, hits_by, stock_spill_credit, window_hist
from benchlib.checks.procfs import parse_interrupts
from benchlib.core.profiles import QUIET
from benchlib.core.bootrecord import BootRecord

# ttyS0 interrupts the window's noise raises (fixtures/ttynoise.c counts them):
# enough for at least two 1024-interrupt spills on the CPU that takes irq 4.
NOISE_IRQS = 3000
# An edge interrupt that arrives while its handler runs is handled again without a
# second /proc/interrupts count, so samples and counts agree only within bounds.
SAMPLES_PER_COUNT_MIN, SAMPLES_PER_COUNT_MAX, SAMPLES_SLACK = 0.5, 2.0, 16


@pytest.fixture(scope="module")
def credit_run(boot_guest) -> BootRecord:
    record = boot_guest(QUIET.one(), tasks=["credit"],
                        params={"noise": str(NOISE_IRQS)})
    record.finished_task("credit")
    return record


def sections(record: BootRecord) -> dict[str, list[str]]:
    return record.finished_task("credit").sections()


def test_stock_credit_sampled_irqs_exist_and_grew(credit_run: BootRecord) -> None:
    s = sections(credit_run)
    before, after = parse_interrupts(s["interrupts_before"]), parse_interrupts(s["interrupts_after"])
    sampled = hits_by(window_hist(s, "air"), "irq")
    assert sampled, "no interrupt was sampled by add_interrupt_randomness"
    for irq, hits in sampled.items():
        assert irq in after, f"irq {irq} sampled {hits} times is not in /proc/interrupts"
        grown = after[irq] - before.get(irq, 0)
        assert SAMPLES_PER_COUNT_MIN * grown <= hits <= SAMPLES_PER_COUNT_MAX * grown + \
            SAMPLES_SLACK, f"irq {irq}: {hits} samples but /proc/interrupts grew by {grown}"
    assert sampled.get("4", 0) > 0, f"no ttyS0 (irq 4) interrupt sampled: {sampled}"


def test_stock_credit_follows_the_count_over_64_rule(credit_run: BootRecord) -> None:
    check_credit_rule(sections(credit_run), stock_spill_credit)
