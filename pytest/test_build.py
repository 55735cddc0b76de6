"""kernel/build.sh is safe to run twice at once (the second waits for the first),
and the harness boots only a kernel built from today's inputs."""
from __future__ import annotations

import fcntl
import subprocess
import time
from pathlib import Path

import pytest

from benchlib import paths
from benchlib.errors import BadKernel
from benchlib.kernels import inputs_fingerprint, variant_kernel

# How long the second build is watched while the lock is held.
HELD_S = 3
VARIANT = "stock"


def test_build_waits_for_a_concurrent_build() -> None:
    lock = paths.BUILD_DIR / ".build.lock"
    lock.parent.mkdir(parents=True, exist_ok=True)
    with lock.open("w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        build = subprocess.Popen([str(paths.KERNEL_DIR / "build.sh"), VARIANT],
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        time.sleep(HELD_S)
        still_waiting = build.poll() is None
        fcntl.flock(held, fcntl.LOCK_UN)
    _, err = build.communicate(timeout=1200)
    assert still_waiting, f"build.sh ran while another build held the lock: {err}"
    assert "waiting for another kernel build" in err, err
    assert build.returncode == 0, err


def _fake_build(build_dir: Path, variant: str, image: bytes, fingerprint: str) -> Path:
    """A built-looking variant: a real bzImage and a fingerprint."""
    out = build_dir / "kernel" / variant
    out.mkdir(parents=True)
    (out / "bzImage").write_bytes(image)
    (out / "fingerprint").write_text(fingerprint + "\n")
    return out / "bzImage"


def test_build_stale_kernel_is_refused(monkeypatch, tmp_path: Path) -> None:
    """A bzImage whose recorded inputs are not today's series and fragments is
    never booted: the harness names it stale and says how to rebuild it."""
    current = inputs_fingerprint(VARIANT)
    real = variant_kernel(VARIANT).read_bytes()
    image = _fake_build(tmp_path / "stale", VARIANT, real, "0" * len(current))
    monkeypatch.setattr(paths, "BUILD_DIR", tmp_path / "stale")
    with pytest.raises(BadKernel, match=rf"kernel image '{image}' is stale: .*run "
                                        rf"'kernel/build.sh {VARIANT}'"):
        variant_kernel(VARIANT)
    image = _fake_build(tmp_path / "fresh", VARIANT, real, current)
    monkeypatch.setattr(paths, "BUILD_DIR", tmp_path / "fresh")
    assert variant_kernel(VARIANT) == image.resolve()


def test_build_flavour_is_part_of_the_inputs() -> None:
    """VARIANT+debug is its own build (its fragment is in the fingerprint); an
    unknown flavour is a one-line error naming it."""
    assert inputs_fingerprint(f"{VARIANT}+debug") != inputs_fingerprint(VARIANT)
    with pytest.raises(BadKernel, match=r"unknown flavour 'nosuch' in 'stock\+nosuch' "
                                        r"\(known: debug"):
        inputs_fingerprint(f"{VARIANT}+nosuch")
