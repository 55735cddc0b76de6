"""The patched QEMU's own tests (qemu/test-hyperv-tcg.sh), run from the suite.

synic: a bare-metal guest with QEMU's hyperv-testdev checks message delivery, EOM
re-delivery of a message that found its slot busy, HvSignalEvent, synthetic timer 0
in message mode, the reference TSC page against the time reference counter, reference
time against the ACPI PM timer (an independent clock) and a
direct-mode timer's vector and period, and that all of it carries on after the
running guest is saved to a file and restored in a new QEMU; a vCPU hot-added there
reads the partition's MSRs as VP 0 does and makes hypercalls; with hv-synic alone, an
AutoEOI SINT still needs no APIC EOI after a save and restore; the TLFS's error paths
(#GP for an MSR not offered under hv-enforce-cpuid and for the EOI MSR read, a locked
hypercall MSR, invalid hypercall input values, HvNotifyLongSpinWait). reboot: SynIC
resets with live VMBus routes.
Bad hv-* flag combinations are refused with one error line, not an abort.
"""
from __future__ import annotations

import subprocess

import pytest

from benchlib.core import paths
from benchlib.core.profiles import Needs, get_profile

pytestmark = pytest.mark.vmbus


# The reboot loop stops after 3 boots; this caps it on a loaded host.
REBOOT_WINDOW_S = 180
# A whole case of the script: "synic" runs four QEMUs of up to 130 s each (the
# script's own timeout), "reboot" its window.
SELFTEST_TIMEOUT_S = 900


# The bare-metal case needs no kernel; the Linux boots (message and direct-mode
# timers) and the reboot loop boot the bench's stock one.
KERNEL_FOR = {"synic": None, "linux": "stock", "reboot": "stock"}


@pytest.mark.parametrize("what", [
    pytest.param(what, marks=pytest.mark.benchkernels) if kernel else what
    for what, kernel in KERNEL_FOR.items()])
def test_vmbus_patched_qemu_selftest(what: str, run_dir, request) -> None:
    kernel_variant = KERNEL_FOR[what] and request.getfixturevalue("bench_variant")(
        KERNEL_FOR[what])
    qemu = paths.patched_qemu()
    if not qemu.is_file():
        pytest.fail(f"the patched QEMU '{qemu}' is not built: run 'make qemu'")
    log = run_dir / f"qemu-selftest-{what}.log"
    try:
        result = subprocess.run([str(paths.REPO / "qemu" / "test-hyperv-tcg.sh"), what],
                                capture_output=True, text=True, timeout=SELFTEST_TIMEOUT_S,
                                env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "QEMU": str(qemu),
                                     "KERNEL": str(paths.kernel_image(kernel_variant or "stock")),
                                     "BUILD_DIR": str(paths.BUILD_DIR),
                                     "REBOOT_WINDOW": str(REBOOT_WINDOW_S)})
    except subprocess.TimeoutExpired as exc:
        said = "".join(part.decode(errors="replace") if isinstance(part, bytes) else part or ""
                       for part in (exc.stdout, exc.stderr))
        log.write_text(said)
        pytest.fail(f"qemu/test-hyperv-tcg.sh {what} still ran after {SELFTEST_TIMEOUT_S} s "
                    f"(what it said: {log}):\n" + "\n".join(said.splitlines()[-10:]))
    log.write_text(result.stdout + result.stderr)
    failed = [line for line in result.stdout.splitlines() if line.startswith("FAIL")]
    assert result.returncode == 0 and not failed, \
        "\n".join(failed or result.stdout.splitlines()[-10:] + result.stderr.splitlines()[-5:])


# Hyper-V flag combinations the patched QEMU must refuse under TCG with one clear
# error line (exit status 1), never an assertion abort.
BAD_FLAGS = {
    "hv-synic,hv-stimer": "hv-synic requires hv-vpindex",
    "hv-vpindex,hv-synic,hv-stimer": "hv-stimer requires hv-synic and hv-time",
    "hv-vpindex,hv-synic,hv-time,hv-stimer-direct": "hv-stimer-direct requires hv-stimer",
    # not emulated: refused, never silently dropped
    "hv-vpindex,hv-ipi": "enlightenment hv-ipi cannot be emulated",
    "hv-crash,hv-tlbflush": "enlightenments hv-crash, hv-tlbflush cannot be emulated",
    # alone: no other hv-* flag turns the Hyper-V emulation on (qemu/patches/0019)
    "hv-passthrough": "hv-passthrough is not supported with TCG",
}


@pytest.mark.parametrize("flags", list(BAD_FLAGS))
def test_vmbus_patched_qemu_refuses_bad_hyperv_flags(flags: str) -> None:
    qemu = paths.patched_qemu()
    if not qemu.is_file():
        pytest.fail(f"the patched QEMU '{qemu}' is not built: run 'make qemu'")
    result = subprocess.run([str(qemu), "-L", "/usr/share/seabios", "-L", "/usr/share/qemu",
                             "-nodefaults", "-nographic", "-S", "-nic", "none", "-accel", "tcg",
                             "-machine", "q35", "-cpu", f"qemu64,{flags}"],
                            capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL)
    errors = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.returncode == 1, (f"-cpu qemu64,{flags}: exit status {result.returncode} "
                                    f"(not 1): {result.stderr}")
    assert len(errors) == 1 and BAD_FLAGS[flags] in errors[0], \
        f"-cpu qemu64,{flags}: expected one error naming '{BAD_FLAGS[flags]}': {errors}"


# A Hyper-V profile that asks for invtsc, one that does not, and one with the
# maximum CPU model (RDRAND from it), which must not get it unasked (QEMU's 'max'
# leaves out flags that block migration, invtsc among them).
INVTSC_ASKED = Needs(first=True, hyperv=True, invariant_tsc=True)
INVTSC_NOT_ASKED = Needs(first=True, hyperv=True, invariant_tsc=False)
MAX_CPU_MODEL = Needs(first=True, hyperv=False, cpu_rng=True)
INVTSC_FLAGS = ("constant_tsc", "nonstop_tsc")


@pytest.mark.profiles(INVTSC_ASKED, INVTSC_NOT_ASKED, MAX_CPU_MODEL)
def test_vmbus_invariant_tsc_only_where_profile_asks(boot_guest, profile: str) -> None:
    """Linux sets constant_tsc and nonstop_tsc from CPUID 0x80000007.EDX[8]: present
    where the profile's XML requires invtsc, absent elsewhere."""
    asks = get_profile(profile).caps.invariant_tsc
    record = boot_guest(profile, tasks=["cpuflags"])
    flags = record.finished_task("cpuflags").lines[0].split(":", 1)[1].split()
    seen = {flag: flag in flags for flag in INVTSC_FLAGS}
    assert seen == {flag: asks for flag in INVTSC_FLAGS}, (
        f"{profile} {'asks' if asks else 'does not ask'} for invtsc; the guest's CPU "
        f"flags: {seen} ({record.data_log})")
