"""The patched QEMU's own tests (qemu/test-hyperv-tcg.sh), run from the suite.

synic: a bare-metal guest with QEMU's hyperv-testdev checks message delivery, EOM
re-delivery of a message that found its slot busy, HvSignalEvent, and synthetic
timer 0 in message mode. reboot: SynIC resets with live VMBus routes.
"""
from __future__ import annotations

import subprocess

import pytest

from benchlib import paths

# A shorter reboot loop than the script's default: enough for several boots.
REBOOT_WINDOW_S = 20


# The bare-metal case needs no kernel; the reboot loop boots the bench's stock one.
KERNEL_FOR = {"synic": None, "reboot": "stock"}


@pytest.mark.parametrize("what", list(KERNEL_FOR))
def test_vmbus_patched_qemu_selftest(what: str, run_dir, bench_variant) -> None:
    kernel_variant = KERNEL_FOR[what] and bench_variant(KERNEL_FOR[what])
    qemu = paths.patched_qemu()
    if not qemu.is_file():
        pytest.fail(f"the patched QEMU '{qemu}' is not built: run 'make qemu'")
    result = subprocess.run([str(paths.REPO / "qemu" / "test-hyperv-tcg.sh"), what],
                            capture_output=True, text=True, timeout=600,
                            env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "QEMU": str(qemu),
                                 "KERNEL": str(paths.kernel_image(kernel_variant or "stock")),
                                 "BUILD_DIR": str(paths.BUILD_DIR),
                                 "REBOOT_WINDOW": str(REBOOT_WINDOW_S)})
    (run_dir / f"qemu-selftest-{what}.log").write_text(result.stdout + result.stderr)
    failed = [line for line in result.stdout.splitlines() if line.startswith("FAIL")]
    assert result.returncode == 0 and not failed, \
        "\n".join(failed or result.stdout.splitlines()[-10:] + result.stderr.splitlines()[-5:])
