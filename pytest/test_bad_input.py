"""Bad input gets one clear line naming the bad value, the stage reached and the log."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from benchlib.core import paths
from benchlib.boot import plan
from benchlib.core.errors import BadKernel, BootFailed, NeedsKvm, UnknownProfile
from benchlib.core.kernels import check_bzimage
from benchlib.core.profiles import QUIET, get_profile

# A stalled boot is declared after this long in these tests (not the default).
STALL_DEADLINE_S = 20


def test_unknown_profile_is_named() -> None:
    with pytest.raises(UnknownProfile, match="unknown profile 'no-such-hypervisor'"):
        get_profile("no-such-hypervisor")


def test_run_cli_rejects_unknown_profile_in_one_line() -> None:
    result = subprocess.run([sys.executable, "-m", "benchlib.commands.run", "--profile", "nope",
                             "--no-build", "--dry-run"], capture_output=True, text=True,
                            cwd=paths.REPO)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        f"bench: unknown profile 'nope' (known: {', '.join(sorted(p.stem for p in paths.PROFILE_DIR.glob('*.xml')))})"]


def test_missing_kernel_is_named(tmp_path: Path) -> None:
    missing = tmp_path / "bzImage"
    with pytest.raises(BadKernel, match=f"kernel image '{missing}' does not exist"):
        check_bzimage(missing)


def test_corrupt_kernel_is_named(tmp_path: Path) -> None:
    corrupt = tmp_path / "bzImage"
    corrupt.write_bytes(b"\x7fELF" + bytes(4096))
    with pytest.raises(BadKernel, match=f"kernel image '{corrupt}' is not an x86 bzImage"):
        check_bzimage(corrupt)


def test_kvm_only_profile_on_tcg_host_is_named(monkeypatch, tmp_path: Path) -> None:
    # As on a host without the patched QEMU: it is the only way to Hyper-V under TCG.
    monkeypatch.setattr(paths, "BUILD_DIR", tmp_path)
    with pytest.raises(NeedsKvm, match="profile 'hyperv' needs Hyper-V SynIC: KVM is not usable"):
        plan.check(get_profile("hyperv", paths.PROFILE_DIR), "tcg")


def test_truncated_kernel_is_named_before_any_boot(boot_guest, kernel_under_test,
                                                   tmp_path: Path) -> None:
    """A cut-off bzImage (its boot header declares more) is refused by name before a
    domain exists: booted, it hangs without a line on the console."""
    whole = kernel_under_test.image.read_bytes()
    assert check_bzimage(kernel_under_test.image)
    truncated = tmp_path / "bzImage"
    truncated.write_bytes(whole[:256 * 1024])
    with pytest.raises(BadKernel, match=f"kernel image '{truncated}' is truncated: "
                                        f"{256 * 1024} bytes, its boot header declares"):
        boot_guest(QUIET.one(), tasks=["probe"], variant="truncated", kernel=truncated,
                   stage_deadline_s=STALL_DEADLINE_S)


def test_guest_panic_is_reported_with_stage(boot_guest) -> None:
    # An init that does not exist, asked for by name: the kernel panics.
    with pytest.raises(BootFailed, match="Kernel panic - not syncing") as failure:
        boot_guest(QUIET.one(), tasks=["probe"],
                   extra_cmdline="rdinit=/no-such-init init=/no-such-init",
                   stage_deadline_s=STALL_DEADLINE_S)
    assert failure.value.stage == "kernel"
    assert Path(failure.value.console_log).is_file()


def test_guest_that_never_reaches_init_is_reported_with_stage(boot_guest) -> None:
    # A shell as init waits for input forever: the bench's init stage never comes.
    with pytest.raises(BootFailed, match="no stage 'init' within") as failure:
        boot_guest(QUIET.one(), tasks=["probe"], extra_cmdline="rdinit=/bin/sh",
                   stage_deadline_s=STALL_DEADLINE_S)
    assert failure.value.stage == "kernel"
    assert "Linux version" in Path(failure.value.console_log).read_text()
