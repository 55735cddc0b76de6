"""A variant is data: a folder with a series and a variant.toml is built, booted,
reported and vmbus-tested with no Python change.

The test writes a throwaway variant (parent `stock`, no patch of its own, its own
milestone name for 6.1's "crng init done"), builds it with kernel/build.sh (a
variant that adds nothing to its parent's kernel links the parent's bzImage), runs
the main job on it (`benchlib.commands.run`: one boot, its report row must be `ok` and name
its milestone) and the VMBus tests selected by its name in a pytest of its own.
The folder and its build are removed afterwards, pass or fail.
"""
from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from benchlib.core import paths
from benchlib.report import report_json
from benchlib.core.profiles import Needs

MILESTONE = "throwaway ready"
VARIANT_TOML = f"""\
description = "test only: stock 6.1 under another name, written by test_variant_as_data.py"
ready = "{MILESTONE}"
final = "{MILESTONE}"
trace = "stock"
credit_rule = "stock"

[milestones]
"{MILESTONE}" = '^random: crng init done$'
"""
REPORT_PROFILE = "tcg-virtio-rng"
VMBUS_PROFILES = Needs(first=True, hyperv=True, interrupt_only=True).names()


@pytest.fixture
def throwaway_variant(bench_variant) -> str:
    bench_variant("stock")     # with --kernel, this test is skipped: it boots its own
    name = f"throwaway-{secrets.token_hex(3)}"
    folder = paths.KERNEL_DIR / "patches" / name
    folder.mkdir()
    try:
        (folder / "series").write_text("# no patch of its own: the parent's kernel\n")
        (folder / "parent").write_text("stock\n")
        (folder / "variant.toml").write_text(VARIANT_TOML)
        yield name
    finally:
        shutil.rmtree(folder, ignore_errors=True)
        shutil.rmtree(paths.BUILD_DIR / "kernel" / name, ignore_errors=True)


# A build, a boot and a VMBus boot: generous, never reached when all is well.
SUBPROCESS_TIMEOUT_S = 1800


def run(args: list[str], cwd: Path, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(args, cwd=cwd, capture_output=True, text=True,
                          timeout=SUBPROCESS_TIMEOUT_S, env={**os.environ, **env})


@pytest.mark.vmbus
def test_variant_added_as_data_is_built_booted_reported_and_vmbus_tested(
        throwaway_variant: str, run_dir: Path, accel: str) -> None:
    name = throwaway_variant
    built = run([str(paths.KERNEL_DIR / "build.sh"), name], paths.REPO)
    assert built.returncode == 0, built.stderr
    assert (paths.BUILD_DIR / "kernel" / name / "bzImage").is_file()

    results = run_dir / f"{name}-run"
    report = run([sys.executable, "-m", "benchlib.commands.run", "--no-build", "--variant", name,
                  "--profile", REPORT_PROFILE, "--boots", "1", "--cap", "30",
                  "--no-throughput", "--no-clones", "--no-budget", "--accel", accel],
                 paths.REPO, RESULTS_DIR=str(results))
    assert report.returncode == 0, report.stdout[-2000:] + report.stderr[-2000:]
    (outdir,) = [d for d in results.iterdir() if d.is_dir()]
    found = json.loads((outdir / "report.json").read_text())
    report_json.validate(found)
    cells = found["cells"]
    assert [(c["variant"], c["verdict"]) for c in cells] == [(name, "ok")], cells
    (milestone,) = cells[0]["milestones"]
    assert milestone["name"] == MILESTONE and milestone["printk_s"]["n"] == 1, milestone
    text = (outdir / "report.txt").read_text()
    assert f"== {name}: " in text and f"  {MILESTONE}  " in text, text

    vmbus = run([sys.executable, "-m", "pytest", "-c", "tox.ini", "--rootdir=.", "-q",
                 "-p", "no:cacheprovider", "-k", f"vmbus and {name}", f"--accel={accel}",
                 *(f"--profile={p}" for p in VMBUS_PROFILES)], paths.REPO)
    assert vmbus.returncode == 0, vmbus.stdout[-3000:]
    assert " passed" in vmbus.stdout and " skipped" not in vmbus.stdout, vmbus.stdout[-3000:]
