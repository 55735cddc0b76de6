"""kernel/build.sh is safe to run twice at once: the second waits for the first."""
from __future__ import annotations

import fcntl
import subprocess
import time

from benchlib import paths

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
