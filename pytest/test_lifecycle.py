"""Guests never outlive the run that started them: a run killed mid-boot (SIGINT,
SIGTERM) destroys its domain and keeps its logs."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from benchlib import paths
from benchlib.guest import running_bench_domains
from benchlib.profiles import quiet_profiles

# How long a run may take to create its first domain, and to exit once signalled.
START_WAIT_S = 120
EXIT_WAIT_S = 60
POLL_S = 0.2


def first_boot_dir(results: Path) -> Path | None:
    return next(iter(sorted(results.glob("*/boots/bench-*"))), None)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=lambda s: s.name)
def test_lifecycle_killed_run_leaves_no_guest(sig: signal.Signals, libvirt_conn,
                                              tmp_path: Path) -> None:
    run = subprocess.Popen(
        [sys.executable, "-m", "benchlib.run", "--no-build", "--no-throughput", "--accel", "tcg",
         "--profile", quiet_profiles()[0], "--variant", "stock", "--boots", "1"],
        cwd=paths.REPO / "pytest", env={**os.environ, "RESULTS_DIR": str(tmp_path)},
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + START_WAIT_S
        boot_dir = None
        while time.monotonic() < deadline and run.poll() is None:
            boot_dir = first_boot_dir(tmp_path)
            if boot_dir and boot_dir.name in running_bench_domains(libvirt_conn):
                break
            time.sleep(POLL_S)
        assert boot_dir and boot_dir.name in running_bench_domains(libvirt_conn), (
            f"the run started no guest within {START_WAIT_S} s: {run.communicate()}")
        time.sleep(1)       # well inside the boot
        run.send_signal(sig)
        _, err = run.communicate(timeout=EXIT_WAIT_S)
    finally:
        if run.poll() is None:
            run.kill()
    assert run.returncode == 130, f"exit code {run.returncode}: {err}"
    assert boot_dir.name not in running_bench_domains(libvirt_conn), (
        f"{boot_dir.name} still runs after the run was killed with {sig.name}")
    assert (boot_dir / "console.log").is_file(), f"no console log kept in {boot_dir}"
    assert "interrupted" in err, err
