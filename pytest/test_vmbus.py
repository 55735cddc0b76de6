"""Hyper-V: the synthetic timer's ticks and vmbus_isr's interrupts feed and credit the RNG.

Runs in every interrupt-only Hyper-V profile (SynIC, synthetic timers, VMBus
bridge; no virtio-rng, no RDRAND, no input devices, no blocking reader), for every
built variant; under TCG on our patched QEMU. Per synthetic-timer mode, read from
the profile's XML: `hyperv` (direct mode, as on Azure) takes its ticks through
sysvec_hyperv_stimer0 on HYPERV_STIMER0_VECTOR (HVS), `hyperv-msgtimer` (message
mode) through vmbus_isr on HYPERVISOR_CALLBACK_VECTOR (HYP). In direct mode
vmbus_isr runs only for VMBus traffic, and QEMU 7.2 has no VMBus devices: the
guest raises VMBus's SINT itself through QEMU's hyperv-testdev, in a second
window. The `test-novmbus` variant (its series removes the call from vmbus_isr)
is the negative control, in both modes.
"""
from __future__ import annotations

import functools
import time

import pytest

from benchlib.checks import measure
from benchlib.boot import plan
from benchlib.checks.credit import CREDIT_RULES, CreditRule
from benchlib.core.errors import Skip
from benchlib.boot.kreports import reports, stalls
from benchlib.core.paths import KERNEL_DIR
from benchlib.checks.procfs import parse_interrupts
from benchlib.core.profiles import Needs, get_profile
from benchlib.core.bootrecord import BootRecord, kmsg_position
from benchlib.boot.record import messages_from, parse_data, read_text
from benchlib.boot.restore import SavedGuest
from benchlib.core.variants import load
from benchlib.checks.vmbus import (HYP_ROW, TICK_PATHS, TSC_PAGE_CLOCKSOURCE,
                                   assert_ticks_take_path, assert_vmbus_isr_feeds_rng,
                                   current_clocksource, hyp_growth, path_share, row_per_cpu,
                                   vmbus_isr_entries, vmbus_share)

pytestmark = pytest.mark.vmbus

PROFILES = Needs(hyperv=True, interrupt_only=True)
MESSAGE_MODE = Needs(hyperv=True, interrupt_only=True, stimer_mode="message")
TSC_PAGE = Needs(hyperv=True, interrupt_only=True, reference_tsc=True)
# Direct mode takes the ticks past vmbus_isr, which then runs only when a SINT is
# raised: QEMU 7.2 has no VMBus devices, so the guest raises it itself through
# QEMU's hyperv-testdev (task vmbus_sint, fixtures/sintpoke.c).
SINT_INJECTED = Needs(hyperv=True, interrupt_only=True, stimer_mode="direct",
                      sint_injector=True)
# Where vmbus_isr runs in a window: message mode with every tick, direct mode with
# the injected SINTs.
VMBUS_ISR_RUNS = (MESSAGE_MODE, SINT_INJECTED)
NEGATIVE_CONTROL = "test-novmbus"
LRNG_NEGATIVE_CONTROL = "test-lrng-fullbit"
# Seconds the kprobes stay armed; the synthetic timer ticks through vmbus_isr.
WINDOW_S = 3
# fixtures/init task vmbus: the bus's directory in sysfs is there.
VMBUS_PRESENT = "bus: present"
# At HZ=100 the tick alone spills ~100 interrupts a CPU at each 1 s flush, too few
# for a spill that tells count/64 from 1 bit a spill (credit.DISCRIMINATING_SPILL):
# a little console noise makes one CPU's spills larger: counted in the interrupts it
# raises (fixtures/ttynoise.c), and few enough that the ticks (600 in the window
# at HZ=100, 1500 at Debian's HZ=250) stay the larger share of the samples.
NOISE_IRQS = 300
# SINT raises per vCPU in the vmbus_sint window, rounds 2 ms apart (sintpoke's
# default gap): they outnumber the window's ticks. sintpoke raises each only once
# its vCPU took the last (its HYP count grew), so none is merged with another.
SINTS_PER_CPU = 200


@pytest.fixture(scope="module")
def vmbus_boot(boot_guest):
    @functools.cache
    def _boot(profile: str, variant: str) -> BootRecord:
        kprobes = CREDIT_RULES[load(variant).credit_rule].kprobes
        tasks = ["vmbus", "vmbus_sint"] if profile in SINT_INJECTED else ["vmbus"]
        return boot_guest(profile, tasks=tasks, variant=variant,
                          params={"noise": str(NOISE_IRQS), "window": str(WINDOW_S),
                                  "kprobes": kprobes, "sints": str(SINTS_PER_CPU)})
    return _boot


def mode(profile: str) -> str:
    return get_profile(profile).caps.stimer_mode


def sections(record: BootRecord) -> dict[str, list[str]]:
    return record.finished_task("vmbus").sections()


def vmbus_isr_sections(record: BootRecord, profile: str) -> dict[str, list[str]]:
    """The window in which vmbus_isr runs: the ticks' (message mode) or the
    injected SINTs' (direct mode)."""
    return sections(record) if mode(profile) == "message" \
        else record.finished_task("vmbus_sint").sections()


def sints_raised(window: dict[str, list[str]]) -> tuple[int, int]:
    """(raised, taken) summed over sintpoke's reports ("@@SINT vp=V sint=S raised=N
    taken=T" per vCPU): taken are the raises its vCPU's HYP count was seen to take
    before the next one was raised."""
    reports = [dict(w.split("=", 1) for w in line.split()[1:])
               for line in window.get("load", []) if line.startswith("@@SINT ")]
    assert reports, f"sintpoke reported no raises: {window.get('load')}"
    return sum(int(r["raised"]) for r in reports), sum(int(r["taken"]) for r in reports)


@pytest.mark.profiles(PROFILES)
def test_vmbus_guest_finds_hyperv_and_vmbus(vmbus_boot, profile: str, variant: str) -> None:
    record = vmbus_boot(profile, variant)
    texts = [text for _, text in record.messages]
    assert any("Hypervisor detected: Microsoft Hyper-V" in t for t in texts), record.console_log
    assert any("hv_vmbus: Vmbus version:" in t for t in texts), record.console_log
    s = sections(record)
    # The bus is there (QEMU offers no VMBus device, so its device list is empty).
    assert VMBUS_PRESENT in s["vmbus_devices"], s["vmbus_devices"]
    if get_profile(profile).caps.enlightened_apic:
        # hv-vapic: EOI, ICR and TPR through the Hyper-V MSRs
        assert any("Hyper-V: Using enlightened APIC" in t for t in texts), record.console_log
    # VMBus's own messages (contact, offers) came through vmbus_isr at boot.
    assert parse_interrupts(s["interrupts_after"]).get(HYP_ROW, 0) > 0, \
        "the HYP row of /proc/interrupts is empty: vmbus_isr never ran"
    if mode(profile) == "message":
        assert hyp_growth(s) > 0, "the HYP row of /proc/interrupts did not grow"


@pytest.mark.profiles(PROFILES)
def test_vmbus_ticks_take_the_timer_mode_path(vmbus_boot, profile: str, variant: str) -> None:
    """Direct mode: HVS grows on every CPU and the samples come from
    __sysvec_hyperv_stimer0 on vector 0xed, none of the ticks through vmbus_isr;
    message mode: HYP grows on every CPU, samples from vmbus_isr on 0xf3, no HVS."""
    assert_ticks_take_path(sections(vmbus_boot(profile, variant)), mode(profile))


@pytest.mark.profiles(TSC_PAGE)
def test_vmbus_clocksource_is_the_reference_tsc_page(vmbus_boot, profile: str,
                                                    variant: str) -> None:
    record = vmbus_boot(profile, variant)
    assert current_clocksource(record.messages) == TSC_PAGE_CLOCKSOURCE, (
        f"current clocksource {current_clocksource(record.messages)!r}, not "
        f"{TSC_PAGE_CLOCKSOURCE}: {record.console_log}")


@pytest.mark.profiles(*VMBUS_ISR_RUNS)
def test_vmbus_isr_feeds_add_interrupt_randomness(vmbus_boot, profile: str,
                                                  variant: str) -> None:
    assert_vmbus_isr_feeds_rng(vmbus_isr_sections(vmbus_boot(profile, variant), profile))


@pytest.mark.profiles(SINT_INJECTED)
def test_vmbus_isr_interrupts_are_credited_in_direct_mode(vmbus_boot, profile: str,
                                                          variant: str,
                                                          record_property) -> None:
    """Direct mode: the ticks bypass vmbus_isr, and its own interrupts (SINTs
    raised through hyperv-testdev) still reach the RNG: vmbus_isr ran for the
    raises and handed each to add_interrupt_randomness on the callback vector,
    and the window, where they are about half the samples (the ticks go on), was
    credited by the variant's rule."""
    record = vmbus_boot(profile, variant)
    window = vmbus_isr_sections(record, profile)
    (raised, taken), entries = sints_raised(window), vmbus_isr_entries(window)
    assert raised == SINTS_PER_CPU * get_profile(profile).caps.vcpus, window["load"]
    assert taken == raised, (
        f"{raised - taken} of {raised} SINT raises were not seen taken within sintpoke's "
        f"limit: {window['load']}")
    assert entries >= taken, (
        f"vmbus_isr ran {entries} times for {taken} SINTs its vCPUs took")
    assert_vmbus_isr_feeds_rng(window)
    record_property("vmbus_isr_share_of_sampled_interrupts", round(vmbus_share(window), 3))
    rule = CREDIT_RULES[record.spec().credit_rule]
    assert_rule_credits_in_window(record, rule, window=1)
    # The raises come 2 ms apart: each CPU's spills stay near 64 interrupts, too
    # small to tell count/64 from a bit a spill (the first window tells them
    # apart); what is checked here is that they are credited, a spill at a time.
    rule.check(window, discriminating=False)


def milestone_time(record: BootRecord, which: str) -> float | None:
    """Printk time of a variant's milestone named as "ready" or by its own name."""
    return measure.ready_printk(record) if which == "ready" else record.milestone(which)


def assert_rule_credits_in_window(record: BootRecord, rule: CreditRule, window: int) -> None:
    """The boot's nth credit window (counted from 0) lies where the variant's rule
    credits: after its first milestone, before its last."""
    _, window_start = kmsg_position(record, "bench: window start", nth=window)
    _, window_end = kmsg_position(record, "bench: window end", nth=window)
    if rule.until_milestone:
        ended = milestone_time(record, rule.until_milestone)
        if ended is not None and ended <= window_end:
            pytest.fail(f"{record.variant}: its crediting ends at '{rule.until_milestone}', "
                        f"reached at {ended} s, before the window closed at {window_end} s: "
                        "nothing was credited to check")
    if rule.from_milestone:
        started = milestone_time(record, rule.from_milestone)
        assert started is not None and started < window_start, (
            f"{record.variant}: its crediting starts at '{rule.from_milestone}', not reached "
            f"before the window opened at {window_start} s (reached: {started})")


@pytest.mark.profiles(PROFILES)
def test_vmbus_interrupts_are_credited(vmbus_boot, profile: str, variant: str,
                                       record_property) -> None:
    """The spills in the window are credited by the variant's own rule (its
    variant.toml names it), and the window lies where that rule credits; most
    sampled interrupts are the synthetic timer's, on the timer mode's path (the
    bench's own console noise left out)."""
    record = vmbus_boot(profile, variant)
    s = sections(record)
    rule = CREDIT_RULES[record.spec().credit_rule]
    assert_rule_credits_in_window(record, rule, window=0)
    path = "vmbus_isr" if mode(profile) == "message" else "sysvec_hyperv_stimer0"
    share = path_share(s, mode(profile))
    record_property(f"{path}_share_of_sampled_interrupts", round(share, 3))
    print(f"\n{profile}/{variant}: {share:.1%} of the sampled interrupts (console noise "
          f"left out) came through {path}")
    rule.check(s)
    assert share > 0.5, (f"only {share:.1%} of the sampled interrupts (console noise left "
                         f"out) came through {path}")


@pytest.mark.profiles(*VMBUS_ISR_RUNS)
def test_vmbus_negative_control_without_the_hook_fails(vmbus_boot, profile: str,
                                                       bench_variant) -> None:
    assert (KERNEL_DIR / "patches" / NEGATIVE_CONTROL / "series").is_file()
    record = vmbus_boot(profile, bench_variant(NEGATIVE_CONTROL))
    s = vmbus_isr_sections(record, profile)
    assert hyp_growth(s) > 0, "the negative control's guest had no HYP interrupts at all"
    with pytest.raises(AssertionError, match="no add_interrupt_randomness call from vmbus_isr"):
        assert_vmbus_isr_feeds_rng(s)


@pytest.mark.profiles(MESSAGE_MODE)
def test_vmbus_lrng_negative_control_fullbit_fails_the_credit_rule(vmbus_boot, profile: str,
                                                                    bench_variant) -> None:
    """The LRNG's crediting check, on a kernel that credits a full bit per interrupt
    on purpose (test-lrng-fullbit): the interrupts vmbus_isr hands on are credited
    256/256, not the seed's 256/288, and the check must say so."""
    record = vmbus_boot(profile, bench_variant(LRNG_NEGATIVE_CONTROL))
    with pytest.raises(AssertionError, match="not the seed's"):
        CREDIT_RULES[record.spec().credit_rule].check(sections(record))


# Save/restore (a new QEMU process, as for migration): the guest waits SAVE_POINT_S (guest seconds) after its "save_point" line before
# its window opens; the host saves it SAVE_AFTER_S after seeing the line, so the
# window's readings (and the ticks between them) all come after the restore.
SAVE_POINT_S = 6
SAVE_AFTER_S = 1
SAVE_WINDOW_S = 4
SAVE_BOOT_DEADLINE_S = 600


@pytest.mark.profiles(PROFILES)
def test_vmbus_save_restore_keeps_ticking(host_pool, initrd, accel, run_dir, profile: str,
                                          kernel_under_test) -> None:
    """virsh save / virsh restore of a running Hyper-V guest asleep before its idle
    window: after the restore the guest's synthetic timer keeps ticking (the sleep
    ends, the window opens and its tick row grows on every CPU, all after the
    restore, the tasks after it run) and its kernel log has no oops."""
    host = host_pool.first
    if not host.shares_files:
        pytest.skip(f"save/restore keeps the saved image and the data log in this run's folder: "
                    f"the first --libvirt-uri must be this machine's own daemon, not {host.uri}")
    try:
        request = plan.request(get_profile(profile), under_test=kernel_under_test, initrd=initrd,
                               outdir=run_dir, accel=accel, tasks=["vmbus"],
                               params={"noise": "0", "window": str(SAVE_WINDOW_S),
                                       "save_point": str(SAVE_POINT_S)})
    except Skip as exc:
        pytest.skip(str(exc))
    with host_pool.lease(host), SavedGuest(host.conn, request, "saverestore") as guest:
        data_log = guest.ready.data_log
        guest.wait_for("@@SECTION save_point", SAVE_BOOT_DEADLINE_S)
        time.sleep(SAVE_AFTER_S)
        image = guest.save()
        assert guest.gone()
        assert "@@SECTION window_open" not in read_text(data_log), (
            f"the window opened before the save ({SAVE_POINT_S} s after the save point): "
            f"its ticks would not show the restored guest's timer ({data_log})")
        guest.restore(image)
        guest.wait_for("@@END kmsg", SAVE_POINT_S + SAVE_WINDOW_S + 300)
    tasks, _ = parse_data(read_text(data_log))
    assert "vmbus" in tasks and tasks["vmbus"].rc == 0, \
        f"the vmbus task did not finish after the restore: {data_log}"
    assert "kmsg" in tasks and tasks["kmsg"].rc == 0, f"no kernel log after the restore: {data_log}"
    s = tasks["vmbus"].sections()
    row = TICK_PATHS[mode(profile)][2]
    before = row_per_cpu(s["interrupts_before"], row)
    after = row_per_cpu(s["interrupts_after"], row)
    assert before and after and all(a > b for a, b in zip(after, before)), (
        f"the {row} row did not grow on every CPU across the save/restore: "
        f"{before} -> {after}")
    messages = messages_from(tasks)
    bad = reports(messages) + stalls(messages)
    assert not bad, f"the kernel reported {bad[:3]} around the save/restore: {data_log}"
