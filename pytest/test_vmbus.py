"""Hyper-V: interrupts that arrive through vmbus_isr feed and credit the RNG.

Runs in the `hyperv` profile (SynIC, message-mode synthetic timer, VMBus bridge;
no virtio-rng, no RDRAND, no input devices, no blocking reader), for every built
variant; under TCG on our patched QEMU. The `test-novmbus` variant (its series
removes the call from vmbus_isr) is the negative control.
"""
from __future__ import annotations

import functools

import pytest

from benchlib.credit import check_credit_rule, stock_spill_credit
from benchlib.paths import KERNEL_DIR, known_variants
from benchlib.record import BootRecord, parse_console
from benchlib.vmbus import assert_vmbus_isr_feeds_rng, hyp_growth, vmbus_share

PROFILE = "hyperv"
NEGATIVE_CONTROL = "test-novmbus"
# Seconds the kprobes stay armed; the synthetic timer ticks through vmbus_isr.
WINDOW_S = 3
# Messages after which a variant credits interrupts no more (or by another rule).
CREDITING_ENDS = {"stock": "random: crng init done", "crng": "random: crng_init 3"}
# Each variant's crediting rule for a fast-pool spill while it credits: the crng
# variant fast-loads (credits nothing) only below state 2, then credits as 6.1.
CREDIT_RULES = {"stock": stock_spill_credit, "crng": stock_spill_credit}
CREDITING_STARTS = {"crng": "random: crng_init 2"}


@pytest.fixture(scope="module")
def vmbus_boot(boot_guest):
    @functools.cache
    def _boot(variant: str) -> BootRecord:
        return boot_guest(PROFILE, tasks=["vmbus"], variant=variant,
                          params={"noise": "0", "window": str(WINDOW_S)})
    return _boot


def sections(record: BootRecord) -> dict[str, list[str]]:
    task = record.task("vmbus")
    assert task.rc == 0, "\n".join(task.lines[-20:])
    return task.sections()


@pytest.mark.parametrize("variant", known_variants())
def test_vmbus_guest_finds_hyperv_and_vmbus(vmbus_boot, variant: str) -> None:
    record = vmbus_boot(variant)
    texts = [text for _, text in record.messages]
    assert any("Hypervisor detected: Microsoft Hyper-V" in t for t in texts), record.console_log
    assert any("hv_vmbus: Vmbus version:" in t for t in texts), record.console_log
    s = sections(record)
    assert not any("No such file" in line for line in s["vmbus_devices"]), s["vmbus_devices"]
    assert hyp_growth(s) > 0, "the HYP row of /proc/interrupts did not grow"


@pytest.mark.parametrize("variant", known_variants())
def test_vmbus_isr_feeds_add_interrupt_randomness(vmbus_boot, variant: str) -> None:
    assert_vmbus_isr_feeds_rng(sections(vmbus_boot(variant)))


@pytest.mark.parametrize("variant", known_variants())
def test_vmbus_interrupts_are_credited(vmbus_boot, variant: str, record_property) -> None:
    record = vmbus_boot(variant)
    s = sections(record)
    log = parse_console("\n".join(s["kmsg"]))
    window_end = next(t for t, text in log if text == "bench: window end")
    window_start = next(t for t, text in log if text == "bench: window start")
    ends = CREDITING_ENDS.get(variant)
    ended = [t for t, text in log if ends and text.startswith(ends) and t <= window_end]
    if ended:
        pytest.fail(f"{variant}: '{ends}' at {ended[0]} s, before the window closed at "
                    f"{window_end} s: nothing was credited to check")
    starts = CREDITING_STARTS.get(variant)
    if starts:
        started = [t for t, text in log if text.startswith(starts)]
        assert started and started[0] < window_start, (
            f"{variant}: '{starts}' not before the window at {window_start} s")
    share = vmbus_share(s)
    record_property("vmbus_share_of_sampled_interrupts", round(share, 3))
    print(f"\n{variant}: {share:.1%} of the sampled interrupts came through vmbus_isr")
    check_credit_rule(s, CREDIT_RULES[variant])
    assert share > 0.5, f"only {share:.1%} of the sampled interrupts came through vmbus_isr"


def test_vmbus_negative_control_without_the_hook_fails(vmbus_boot) -> None:
    assert (KERNEL_DIR / "patches" / NEGATIVE_CONTROL / "series").is_file()
    record = vmbus_boot(NEGATIVE_CONTROL)
    s = sections(record)
    assert hyp_growth(s) > 0, "the negative control's guest had no HYP interrupts at all"
    with pytest.raises(AssertionError, match="no add_interrupt_randomness call from vmbus_isr"):
        assert_vmbus_isr_feeds_rng(s)
