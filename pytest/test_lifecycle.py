"""Guests never outlive the run that started them: a run killed mid-boot (SIGINT,
SIGTERM) destroys its domain and keeps its logs."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from benchlib.core import paths
from benchlib.boot.guest import running_bench_domains
from benchlib.boot.hosts import HostPool
from benchlib.core.profiles import QUIET

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
        [sys.executable, "-m", "benchlib.commands.run", "--no-build", "--no-throughput", "--accel",
         "tcg", "--profile", QUIET.one(), "--variant", "stock", "--boots", "1"],
        cwd=paths.REPO, env={**os.environ, "RESULTS_DIR": str(tmp_path)},
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
    # The report of what finished (here: nothing), marked incomplete, is written.
    report = boot_dir.parent.parent / "report.txt"
    assert report.is_file(), f"no report written by the interrupted run: {err}"
    assert f"INCOMPLETE: interrupted ({sig.name}) after 0 of 1 matrix boots" in \
        report.read_text(), report.read_text()[:600]
    meta = json.loads((report.parent / "report.json").read_text())["meta"]
    assert meta["interrupted"].startswith(f"interrupted ({sig.name})"), meta


# Guests booted at once under a CPU hog: more guests than cores, and a busy loop
# per core beside them, so that QEMU, virtlogd and the harness all run late.
GUESTS_AT_ONCE = 4
HOG = [sys.executable, "-c", "while True: pass"]


def test_lifecycle_guests_at_once_under_a_cpu_hog_lose_no_stage(boot_guest, libvirt_conn,
                                                                 bench_variant) -> None:
    """A guest that powers off a second after its last marker, on a loaded host,
    must still be followed to the end: a reader that attached to a running guest
    (`virsh console`) lost such markers (1 boot in 27 at three at once). The
    channels are wired before the guest runs, so every boot reaches every stage
    and its data channel holds its 'done' marker."""
    variant = bench_variant("stock")
    profile = QUIET.one()
    hogs = [subprocess.Popen(HOG) for _ in range(os.cpu_count() or 1)]
    pool = HostPool([libvirt_conn.getURI()], GUESTS_AT_ONCE)
    try:
        with ThreadPoolExecutor(GUESTS_AT_ONCE) as workers:
            futures = [workers.submit(boot_guest, profile, ["probe"], variant=variant,
                                      pool=pool) for _ in range(GUESTS_AT_ONCE)]
            records = [f.result() for f in futures]
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()
        pool.close()
    for record in records:
        assert list(record.stages)[-3:] == ["task:kmsg", "done", "poweroff"], (
            f"{record.name}: stages {list(record.stages)}")
        assert "@@BENCH stage=done" in record.data_log.read_text(), record.name
    assert len({r.name for r in records}) == GUESTS_AT_ONCE
