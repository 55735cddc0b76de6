"""Hyper-V: a vCPU hot-added to a running Linux guest (libvirt setvcpus --live).

The guest boots with an empty vCPU slot beside its two vCPUs; once it says it
waits (init task hotadd), the host plugs a vCPU into the slot, the guest onlines
it and then uses it: its clock read there between two reads on CPU 0, a sleep there, which ends
only if the new vCPU's own synthetic timer (direct mode, its EOI through the
enlightened APIC's MSR) fires, and the partition-wide Hyper-V MSRs (guest OS id,
hypercall, reference TSC page), which must read there as on CPU 0.

What this cannot test with a Linux 6.1 guest: VMBus or SINT traffic on the new
vCPU. VMBus allocates its per-CPU SynIC pages (message, event, post-message) for
the CPUs present when it starts (hv_synic_alloc: for_each_present_cpu), so a SINT
on a CPU added later oopses in vmbus_isr() on a NULL event page, and a VMBus
message posted from it on a NULL post-message page (seen: a SINT raised there
through QEMU's test device, 2026-12-07). The pages are the guest's; a host cannot
help it. The patched QEMU's own bare-metal test hot-adds a vCPU that makes
hypercalls (qemu/test-hyperv-tcg.sh).
"""
from __future__ import annotations

import libvirt
import pytest

from benchlib.boot import plan
from benchlib.core.errors import Skip
from benchlib.boot.guest import Guest
from benchlib.boot.kreports import reports, stalls
from benchlib.core.profiles import Needs, get_profile
from benchlib.checks.vmbus import TICK_PATHS, TSC_PAGE_CLOCKSOURCE, row_per_cpu

pytestmark = pytest.mark.vmbus

# The Azure-like profile: direct-mode timers (message mode would deliver the new
# vCPU's ticks as SINTs, which a Linux 6.1 guest cannot take there) and the
# reference TSC page.
HOTADD_PROFILE = Needs(first=True, hyperv=True, stimer_mode="direct", reference_tsc=True)
SPARE_VCPUS = 1
# How long the host waits for the guest to reach the hot-add: a whole boot under
# TCG on a loaded host. (The guest waits HOTADD_WAIT_S for the vCPU, fixtures/init:
# far longer than libvirt takes to plug one.)
WAIT_BOOT_S = 300
WAITING_LINE = "@@SECTION hotadd_waiting"


# The Hyper-V MSRs that hold one value for the whole partition (TLFS): every CPU
# must read what the guest wrote on one. The init reads each on every CPU
# (bench.hotadd_msrs=name:index,...), and the enable bit (TLFS: bit 0 of the
# hypercall and reference TSC MSRs) must be set where the guest enabled them.
PARTITION_MSRS = {"guest_os_id": 0x40000000, "hypercall": 0x40000001,
                  "reference_tsc": 0x40000021}
ENABLED_MSRS = ("hypercall", "reference_tsc")
MSR_ENABLE = 1


def msrs_param(msrs: dict[str, int]) -> str:
    """{name: index} -> the init's bench.hotadd_msrs value, name:0xINDEX,..."""
    return ",".join(f"{name}:{index:#x}" for name, index in msrs.items())


def partition_msrs(lines: list[str]) -> dict[int, dict[str, str]]:
    """("cpuN name=HEX ..." lines) -> {N: {name: HEX}}."""
    rows: dict[int, dict[str, str]] = {}
    for line in lines:
        words = line.split()
        if words and words[0].startswith("cpu") and words[0][3:].isdigit():
            rows[int(words[0][3:])] = dict(w.split("=", 1) for w in words[1:] if "=" in w)
    return rows


def uptimes(lines: list[str]) -> list[tuple[int, float]]:
    """("cpuN UPTIME IDLE" lines) -> [(N, uptime)] in the order read."""
    return [(int(w[0][3:]), float(w[1])) for w in (line.split() for line in lines)
            if len(w) >= 2 and w[0].startswith("cpu")]


@pytest.mark.profiles(HOTADD_PROFILE)
def test_vmbus_hotadded_vcpu_ticks_and_keeps_time(
        host_pool, initrd, accel, run_dir, profile: str, kernel_under_test) -> None:
    prof = get_profile(profile)
    new_cpu = prof.caps.vcpus          # the first empty slot's CPU number
    try:
        request = plan.request(prof, under_test=kernel_under_test, initrd=initrd,
                               outdir=run_dir, accel=accel, tasks=["hotadd"],
                               params={"hotadd_cpu": str(new_cpu),
                                       "hotadd_msrs": msrs_param(PARTITION_MSRS)},
                               spare_vcpus=SPARE_VCPUS)
    except Skip as exc:
        pytest.skip(str(exc))
    with host_pool.lease() as lease, Guest(lease.host.conn, request, lease, "hotadd") as guest:
        guest.wait_for(WAITING_LINE, WAIT_BOOT_S)
        try:
            guest.dom.setVcpusFlags(prof.caps.vcpus + SPARE_VCPUS,
                                    libvirt.VIR_DOMAIN_AFFECT_LIVE)
        except libvirt.libvirtError as exc:
            pytest.fail(f"libvirt could not hot-add a vCPU to {guest.ready.name}: "
                        f"{exc.get_error_message()}")
        guest.follow()
    record = guest.verdict()
    task = record.finished_task("hotadd")
    s = task.sections()
    present = s.get("hotadd_waiting", [])
    assert f"present: 0-{new_cpu - 1}" in present, (
        f"CPU {new_cpu} was there before the hot-add: {present} ({record.data_log})")
    online = s.get("hotadd", [])
    assert f"online: 0-{new_cpu}" in online, (
        f"CPU {new_cpu} is not online after the hot-add: {online} ({record.data_log})")

    # The clock read on the new CPU lies between two reads on CPU 0.
    reads = uptimes(s.get("clock", []))
    assert [cpu for cpu, _ in reads] == [0, new_cpu, 0], f"clock reads: {s.get('clock')}"
    (_, before), (_, on_new), (_, after) = reads
    assert before <= on_new <= after, (
        f"uptime on CPU {new_cpu} ({on_new}) is not between CPU 0's ({before}, {after})")

    # Its own synthetic timer fired: the sleep there ended, its tick row grew.
    tick_row = TICK_PATHS[prof.caps.stimer_mode][2]
    ticks_before = row_per_cpu(s.get("interrupts_before", []), tick_row)
    ticks_after = row_per_cpu(s.get("interrupts_after", []), tick_row)
    assert ticks_before and ticks_after and len(ticks_after) > new_cpu, (
        f"no {tick_row} row for CPU {new_cpu}: {ticks_before} -> {ticks_after}")
    assert ticks_after[new_cpu] > ticks_before[new_cpu], (
        f"CPU {new_cpu}'s synthetic timer did not tick: {tick_row} "
        f"{ticks_before} -> {ticks_after}")

    # The partition-wide MSRs read the same on every CPU, the new one included, and
    # hold what the guest set: its OS id, the hypercall page and the TSC page enabled.
    msrs = partition_msrs(s.get("partition_msrs", []))
    assert sorted(msrs) == list(range(new_cpu + 1)), (
        f"partition MSRs read on CPUs {sorted(msrs)}, not 0-{new_cpu}: "
        f"{s.get('partition_msrs')} ({record.data_log})")
    unread = {cpu: row for cpu, row in msrs.items() if not all(row.get(n) for n in PARTITION_MSRS)}
    assert not unread, f"MSRs not read (/dev/cpu/N/msr): {unread} ({record.data_log})"
    first = msrs[0]
    assert int(first["guest_os_id"], 16) != 0, f"no guest OS id on CPU 0: {first}"
    for name in ENABLED_MSRS:
        assert int(first[name], 16) & MSR_ENABLE, f"{name} not enabled on CPU 0: {first}"
    differ = {cpu: row for cpu, row in msrs.items() if row != first}
    assert not differ, (f"partition-wide MSRs differ from CPU 0's {first}: {differ} "
                        f"({record.data_log})")

    # Still the reference TSC page, and nothing reported by the kernel.
    assert f"clocksource: {TSC_PAGE_CLOCKSOURCE}" in online, online
    bad = reports(record.messages) + stalls(record.messages)
    assert not bad, f"the kernel reported {bad[:3]} around the hot-add ({record.console_log})"
