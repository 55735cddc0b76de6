"""Hyper-V: interrupts that arrive through vmbus_isr feed and credit the RNG.

Runs in the `hyperv` profile (SynIC, message-mode synthetic timer, VMBus bridge;
no virtio-rng, no RDRAND, no input devices, no blocking reader), for every built
variant; under TCG on our patched QEMU. The `test-novmbus` variant (its series
removes the call from vmbus_isr) is the negative control.
"""
from __future__ import annotations

import functools

import pytest

from benchlib import measure
from benchlib.credit import CREDIT_RULES, check_credit_rule
from benchlib.paths import KERNEL_DIR
from benchlib.record import BootRecord, kmsg_position
from benchlib.vmbus import assert_vmbus_isr_feeds_rng, hyp_growth, vmbus_share

PROFILE = "hyperv"
NEGATIVE_CONTROL = "test-novmbus"
# Seconds the kprobes stay armed; the synthetic timer ticks through vmbus_isr.
WINDOW_S = 3
# At HZ=100 the tick alone spills ~100 interrupts a CPU at each 1 s flush, too few
# for a spill that tells count/64 from 1 bit a spill (credit.DISCRIMINATING_SPILL):
# a little console noise makes one CPU's spills larger.
NOISE_LINES = 100


@pytest.fixture(scope="module")
def vmbus_boot(boot_guest):
    @functools.cache
    def _boot(variant: str) -> BootRecord:
        return boot_guest(PROFILE, tasks=["vmbus"], variant=variant,
                          params={"noise": str(NOISE_LINES), "window": str(WINDOW_S)})
    return _boot


def sections(record: BootRecord) -> dict[str, list[str]]:
    return record.finished_task("vmbus").sections()


def test_vmbus_guest_finds_hyperv_and_vmbus(vmbus_boot, variant: str) -> None:
    record = vmbus_boot(variant)
    texts = [text for _, text in record.messages]
    assert any("Hypervisor detected: Microsoft Hyper-V" in t for t in texts), record.console_log
    assert any("hv_vmbus: Vmbus version:" in t for t in texts), record.console_log
    s = sections(record)
    assert not any("No such file" in line for line in s["vmbus_devices"]), s["vmbus_devices"]
    assert hyp_growth(s) > 0, "the HYP row of /proc/interrupts did not grow"


def test_vmbus_isr_feeds_add_interrupt_randomness(vmbus_boot, variant: str) -> None:
    assert_vmbus_isr_feeds_rng(sections(vmbus_boot(variant)))


def milestone_time(record: BootRecord, which: str) -> float | None:
    """Printk time of a variant's milestone named as "ready" or by its own name."""
    return measure.ready_printk(record) if which == "ready" else record.milestone(which)


def test_vmbus_interrupts_are_credited(vmbus_boot, variant: str, record_property) -> None:
    """The spills in the window are credited by the variant's own rule (its
    variant.toml names it), and the window lies where that rule credits."""
    record = vmbus_boot(variant)
    s = sections(record)
    rule = CREDIT_RULES[record.spec().credit_rule]
    _, window_start = kmsg_position(record, "bench: window start")
    _, window_end = kmsg_position(record, "bench: window end")
    if rule.until_milestone:
        ended = milestone_time(record, rule.until_milestone)
        if ended is not None and ended <= window_end:
            pytest.fail(f"{variant}: its crediting ends at '{rule.until_milestone}', reached at "
                        f"{ended} s, before the window closed at {window_end} s: nothing "
                        "was credited to check")
    if rule.from_milestone:
        started = milestone_time(record, rule.from_milestone)
        assert started is not None and started < window_start, (
            f"{variant}: its crediting starts at '{rule.from_milestone}', not reached before "
            f"the window opened at {window_start} s (reached: {started})")
    share = vmbus_share(s)
    record_property("vmbus_share_of_sampled_interrupts", round(share, 3))
    print(f"\n{variant}: {share:.1%} of the sampled interrupts came through vmbus_isr")
    check_credit_rule(s, rule.per_spill)
    assert share > 0.5, f"only {share:.1%} of the sampled interrupts came through vmbus_isr"


def test_vmbus_negative_control_without_the_hook_fails(vmbus_boot, bench_variant) -> None:
    assert (KERNEL_DIR / "patches" / NEGATIVE_CONTROL / "series").is_file()
    record = vmbus_boot(bench_variant(NEGATIVE_CONTROL))
    s = sections(record)
    assert hyp_growth(s) > 0, "the negative control's guest had no HYP interrupts at all"
    with pytest.raises(AssertionError, match="no add_interrupt_randomness call from vmbus_isr"):
        assert_vmbus_isr_feeds_rng(s)
