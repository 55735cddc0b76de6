"""Bad arguments are refused before anything is built or booted, in one line that
names the option and the value, by every command: the main job (benchlib.commands.run, as
the Makefile runs it), the soak (benchlib.commands.soak) and the test suite's options
(bench_options.py). No guest is booted here; each command runs with BUILD_DIR
and RESULTS_DIR in a temporary folder, as on a fresh clone, and must leave both
empty.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from benchlib.commands import dryrun, options, run
from benchlib.boot import hosts
from benchlib.core import paths
from benchlib.core.errors import BenchError
from benchlib.core.kernels import BOOT_HEADER_MAGIC, BOOT_HEADER_MAGIC_OFFSET, variant_kernel
from benchlib.core.profiles import get_profile

# A refusal takes a Python start and a few file reads: well under this, even on a
# loaded 2-core machine (measured: under a second).
REFUSED_WITHIN_S = 15
# --dry-run reads the profiles and the variants' fingerprints, nothing more.
DRY_RUN_WITHIN_S = 60
QUIET = "tcg-quiet"
# Numbers out of range, as issue 25 lists them: (arguments, what the line names).
BAD_NUMBERS = [
    (["--boots", "0"], "--boots 0"),
    (["--boots", "-1"], "--boots -1"),
    (["--cap", "-5"], "--cap -5"),
    (["--cap", "nan"], "--cap nan"),
    (["--cap", "inf"], "--cap inf"),
    (["--timeout", "0"], "--timeout 0"),
    (["--jobs-per-host", "0"], "--jobs-per-host 0"),
    (["--jobs-per-host", "many"], "--jobs-per-host many"),
]
BAD_URIS = [
    (["--libvirt-uri", "localhost"], "--libvirt-uri 'localhost'"),
    (["--libvirt-uri", "qemu:/system"], "--libvirt-uri 'qemu:/system'"),
    (["--libvirt-uri", "qemu://"], "--libvirt-uri 'qemu://'"),
]
# A flavoured variant that nothing built (BUILD_DIR is empty): --no-build refuses it.
UNBUILT = "stock+debug"


@pytest.fixture
def fresh(tmp_path: Path) -> dict[str, str]:
    """The environment of a fresh clone: nothing built, no results yet."""
    for name in ("build", "results"):
        (tmp_path / name).mkdir()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return {**env, "BUILD_DIR": str(tmp_path / "build"), "RESULTS_DIR": str(tmp_path / "results")}


def left_behind(env: dict[str, str]) -> list[str]:
    """Whatever a command made under BUILD_DIR or RESULTS_DIR."""
    return [str(p) for key in ("BUILD_DIR", "RESULTS_DIR") for p in Path(env[key]).iterdir()]


def bench(module: str, args: list[str], env: dict[str, str],
          cwd: Path = paths.REPO) -> tuple[subprocess.CompletedProcess, float]:
    """`python3 -m benchlib.MODULE ARGS` as the Makefile runs it: from the directory
    make was called from, benchlib on PYTHONPATH. Returns the result and its time."""
    started = time.monotonic()
    result = subprocess.run([sys.executable, "-m", module, *args], cwd=cwd, env={
        **env, "PYTHONPATH": str(paths.REPO)}, capture_output=True, text=True,
        timeout=DRY_RUN_WITHIN_S * 2)
    return result, time.monotonic() - started


def assert_refused(result: subprocess.CompletedProcess, elapsed: float, env: dict[str, str],
                   *named: str) -> str:
    """Exit 2, one line on stderr naming each of `named`, quickly, nothing left."""
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2, f"exit {result.returncode}: {result.stdout}{result.stderr}"
    assert len(lines) == 1, f"not one line: {result.stderr}"
    for text in named:
        assert text in lines[0], f"{text!r} not in {lines[0]!r}"
    assert elapsed < REFUSED_WITHIN_S, f"refused after {elapsed:.1f} s"
    assert not left_behind(env), f"left behind: {left_behind(env)}"
    return lines[0]


def fake_bzimage(path: Path) -> Path:
    """The smallest file check_bzimage accepts: a boot header, four setup sectors."""
    image = bytearray(5 * 512)
    image[BOOT_HEADER_MAGIC_OFFSET:BOOT_HEADER_MAGIC_OFFSET + 4] = BOOT_HEADER_MAGIC
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(bytes(image))
    return path


# --- benchlib.commands.run (make run): the --check-only step before the build, and --dry-run

@pytest.mark.parametrize("step", ["--check-only", "--dry-run"])
@pytest.mark.parametrize("args,named", BAD_NUMBERS + BAD_URIS,
                         ids=[n for _, n in BAD_NUMBERS + BAD_URIS])
def test_run_refuses_a_bad_value_before_building(step: str, args: list[str], named: str,
                                                 fresh: dict[str, str]) -> None:
    result, elapsed = bench("benchlib.commands.run", [step, *args], fresh)
    assert_refused(result, elapsed, fresh, f"bench: {named}")


@pytest.mark.parametrize("step", ["--check-only", "--dry-run"])
def test_run_refuses_an_unbuilt_variant_with_no_build(step: str, fresh: dict[str, str]) -> None:
    result, elapsed = bench("benchlib.commands.run", [step, "--no-build", "--variant", UNBUILT],
                            fresh)
    line = assert_refused(result, elapsed, fresh, f"--variant {UNBUILT}", "is missing")
    assert str(Path(fresh["BUILD_DIR"]) / "kernel" / UNBUILT / "bzImage") in line, line


def test_run_resolves_a_relative_path_against_the_callers_directory(
        tmp_path: Path, fresh: dict[str, str]) -> None:
    """A relative --kernel is the caller's (make's directory), not pytest/'s: found
    there, and when it is missing, named resolved."""
    caller = (tmp_path / "caller").resolve()
    fake_bzimage(caller / "mine" / "bzImage")
    result, elapsed = bench("benchlib.commands.run", ["--dry-run", "--variant", "stock",
                                                      "--profile", QUIET, "--kernel",
                                                      "mine/bzImage"], fresh, caller)
    assert result.returncode == 0, result.stderr
    assert f"kernel 'custom': {caller / 'mine' / 'bzImage'}" in result.stderr, result.stderr
    assert "variants: stock custom" in result.stdout, result.stdout
    for option in ("--kernel", "--kernel-deb", "--modules", "--budget", "--profiles-dir"):
        result, elapsed = bench("benchlib.commands.run", ["--check-only", option, "no/such"], fresh,
                                caller)
        assert_refused(result, elapsed, fresh, f"bench: {option}: ", f"'{caller}/no/such'")


def test_run_drops_repeated_values(fresh: dict[str, str]) -> None:
    result, _ = bench("benchlib.commands.run", [
        "--dry-run", "--accel", "tcg", "--profile", QUIET, "--profile", QUIET,
        "--variant", "stock", "--variant", "stock",
        "--libvirt-uri", "qemu:///system", "--libvirt-uri", "qemu:///system"], fresh)
    assert result.returncode == 0, result.stderr
    assert f"profiles: {QUIET}; variants: stock\n" in result.stdout, result.stdout
    assert "plan: 3 matrix boots: 1 variant(s) × 1 profile(s) × 3 boot(s), " in result.stdout \
        and " at a time on 1 host(s): " in result.stdout, result.stdout


def test_run_dry_run_prints_the_plan_quickly_and_builds_nothing(fresh: dict[str, str]) -> None:
    result, elapsed = bench("benchlib.commands.run", ["--dry-run", "--cap", "60"], fresh)
    assert result.returncode == 0, result.stderr
    assert elapsed < DRY_RUN_WITHIN_S, f"--dry-run took {elapsed:.0f} s"
    out = result.stdout
    for expected in ("plan: ", " matrix boots: ", " variant(s) × ", " profile(s) × 3 boot(s)",
                     "accelerator: auto: decided by a probe boot at run time",
                     "cap: 60 s", f"output: {fresh['RESULTS_DIR']}/",
                     "estimate: about ", "basis: ", "never booted here", "(assumed)",
                     "60 s cap if its idle guest waits the cap"):
        assert expected in out, f"{expected!r} not in:\n{out}"
    assert not left_behind(fresh), left_behind(fresh)


def test_run_dry_run_of_one_cell_shows_its_domain(fresh: dict[str, str]) -> None:
    """One profile × one variant: the plan, then the first boot's kernel command
    line and domain XML as the run would start it; nothing is left behind."""
    one_cell = ["--dry-run", "--accel", "tcg", "--profile", QUIET, "--variant", "stock"]
    unbuilt, _ = bench("benchlib.commands.run", one_cell, fresh)
    assert unbuilt.returncode == 0, unbuilt.stderr
    assert f"domain of {QUIET} × stock: not shown: " in unbuilt.stdout, unbuilt.stdout
    built = {**fresh, "BUILD_DIR": str(paths.BUILD_DIR)}
    result, _ = bench("benchlib.commands.run", one_cell, built)
    assert result.returncode == 0, result.stderr
    out = result.stdout
    xml = out[out.index("<domain"):]
    assert "bench.tasks=probe,until,entropy_capture" in out, out
    assert f"<kernel>{variant_kernel('stock')}</kernel>" in xml and "</domain>" in xml, xml
    assert f"{fresh['RESULTS_DIR']}/<start time>/boots/bench-{QUIET}-stock-" in xml, xml
    assert not left_behind(fresh), left_behind(fresh)
    two, _ = bench("benchlib.commands.run", ["--dry-run", "--accel", "tcg", "--profile", QUIET],
                   fresh)
    assert two.returncode == 0 and "<domain" not in two.stdout, two.stdout


def test_run_that_cannot_reach_its_host_leaves_no_results_folder(tmp_path: Path) -> None:
    """A failed start (a host that does not answer) is one line, exit 2, and no
    empty results/<timestamp>/."""
    try:
        variant_kernel("stock")
    except BenchError as exc:
        pytest.skip(f"needs the built stock kernel (make build): the run gets as far as "
                    f"opening its hosts only with a kernel to boot ({exc})")
    results = tmp_path / "results"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    result, elapsed = bench("benchlib.commands.run", [
        "--no-build", "--variant", "stock", "--profile", QUIET, "--accel", "tcg",
        "--libvirt-uri", f"qemu+unix:///system?socket={tmp_path}/no-such.sock"],
        {**env, "RESULTS_DIR": str(results)})
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stderr.strip().splitlines()[-1].startswith("bench: cannot connect to libvirt"), \
        result.stderr
    assert not results.exists() or not any(results.iterdir()), list(results.iterdir())


# --- benchlib.commands.soak (make soak)

@pytest.mark.parametrize("args,named", BAD_NUMBERS[:2] + BAD_URIS[:1],
                         ids=[n for _, n in BAD_NUMBERS[:2] + BAD_URIS[:1]])
def test_soak_refuses_a_bad_value_before_building(args: list[str], named: str,
                                                  fresh: dict[str, str]) -> None:
    result, elapsed = bench("benchlib.commands.soak", ["--check-only", *args], fresh)
    assert_refused(result, elapsed, fresh, f"soak: {named}")


def test_soak_refuses_an_unbuilt_variant_before_its_first_boot(fresh: dict[str, str]) -> None:
    result, elapsed = bench("benchlib.commands.soak", ["--variant", UNBUILT], fresh)
    assert_refused(result, elapsed, fresh, f"soak: --variant {UNBUILT}", "is missing")
    checked, _ = bench("benchlib.commands.soak", ["--check-only", "--variant", UNBUILT], fresh)
    assert checked.returncode == 0, "before the build, a known flavour is enough: " \
                                    + checked.stderr


# --- the test suite's options (make test: pytest --check-args before the build)

def suite(args: list[str], env: dict[str, str]) -> tuple[subprocess.CompletedProcess, float]:
    """pytest as `make test` runs it, with --check-args. Also --collect-only: should
    the check not stop it, the child collects and runs nothing (never the suite,
    with this very file in it)."""
    started = time.monotonic()
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-c", "tox.ini", "--rootdir=.", "-p", "bench_options",
         "-p", "no:cacheprovider", "--collect-only", "--check-args", *args], cwd=paths.REPO,
        env=env, capture_output=True, text=True, timeout=DRY_RUN_WITHIN_S * 2)
    return result, time.monotonic() - started


@pytest.mark.parametrize("args,named", [
    (["--boots", "0"], "--boots 0"),
    (["--jobs-per-host", "0"], "--jobs-per-host 0"),
    (["--libvirt-uri", "localhost"], "--libvirt-uri 'localhost'"),
    (["--kernel", "no/such/bzImage"], f"--kernel: kernel image '{paths.REPO}/no/such/bzImage'"),
    (["--budget", "no/such.toml"], f"--budget: budget file '{paths.REPO}/no/such.toml'"),
], ids=["boots", "jobs-per-host", "libvirt-uri", "kernel", "budget"])
def test_suite_refuses_a_bad_value_before_building(args: list[str], named: str,
                                                   fresh: dict[str, str]) -> None:
    """pytest's usage error (its exit status 4; `make test` then exits 2), one line."""
    result, elapsed = suite(args, fresh)
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.returncode == pytest.ExitCode.USAGE_ERROR, result.stdout + result.stderr
    assert len(lines) == 1 and lines[0].startswith("ERROR: ") and named in lines[0], lines
    assert elapsed < REFUSED_WITHIN_S, f"refused after {elapsed:.1f} s"
    assert not left_behind(fresh), left_behind(fresh)


def test_suite_check_args_accepts_good_values(fresh: dict[str, str]) -> None:
    result, _ = suite(["--boots", "2", "--profile", QUIET, "--profile", QUIET,
                       "--libvirt-uri", "qemu:///system", "-k", "vmbus"], fresh)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "bench: arguments ok" in result.stdout, result.stdout
    assert "collected" not in result.stdout, f"it went on to collect: {result.stdout}"


# --- the Makefile: the check comes before the build, and --dry-run builds nothing

def make_plan(target: str, **variables: str) -> list[str]:
    """The commands `make -n TARGET` would run (recursive makes print theirs too)."""
    result = subprocess.run(["make", "-n", "--no-print-directory", target,
                             *(f"{k}={v}" for k, v in variables.items())],
                            cwd=paths.REPO, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    return result.stdout.splitlines()


def first(lines: list[str], text: str) -> int:
    return next(i for i, line in enumerate(lines) if text in line)


# make test judges the default budgets; a --budget in PYTEST_ARGS follows and wins.
BUDGETS = "vm-definitions/budgets.toml"


@pytest.mark.parametrize("target,variable,check,runs", [
    ("run", "RUN_ARGS", "benchlib.commands.run --check-only --boots 2",
     "benchlib.commands.run --no-build --boots 2"),
    ("soak", "SOAK_ARGS", "benchlib.commands.soak --check-only --boots 2",
     "benchlib.commands.soak --boots 2"),
    ("test", "PYTEST_ARGS", f"-p bench_options --budget {BUDGETS} --check-args --boots 2",
     f"-p bench_options --budget {BUDGETS} --boots 2"),
])
def test_make_checks_the_arguments_before_it_builds(target: str, variable: str, check: str,
                                                    runs: str) -> None:
    lines = make_plan(target, **{variable: "--boots 2"})
    assert first(lines, check) < first(lines, "kernel/build.sh") < first(lines, runs), lines
    assert not any(line.startswith("cd pytest") for line in lines), lines


@pytest.mark.parametrize("no_build, runs", [
    ("--dry-run", "benchlib.commands.run  --dry-run"),
    ("--no-build", "benchlib.commands.run --no-build --no-build"),
    ("--list-profiles", "benchlib.commands.run  --list-profiles")])
def test_make_run_builds_nothing_for_a_dry_run(no_build: str, runs: str) -> None:
    """Nothing is built; a preview says what a run would build rather than refuse a
    kernel not built yet (it is not given --no-build)."""
    lines = make_plan("run", RUN_ARGS=no_build)
    assert not any("build.sh" in line or "make -s -C" in line for line in lines), lines
    assert any(runs in line for line in lines), lines


# --- the checks themselves

def namespace(**values: object) -> argparse.Namespace:
    return argparse.Namespace(**values)


def test_check_keeps_each_repeated_value_once_in_order(tmp_path: Path) -> None:
    values = namespace(profile=[QUIET, "tcg-rdrand", QUIET], libvirt_uri=[
        "qemu:///system", "test:///default", "qemu:///system"], variant=["stock", "stock"])
    options.check(values, tmp_path)
    assert values.profile == [QUIET, "tcg-rdrand"]
    assert values.libvirt_uri == ["qemu:///system", "test:///default"]
    assert values.variant == ["stock"]


@pytest.mark.parametrize("uri", ["qemu:///system", "qemu+ssh://root@host/system",
                                 "qemu+unix:///system?socket=/run/x.sock", "test:///default"])
def test_check_accepts_libvirt_uris(uri: str, tmp_path: Path) -> None:
    options.check(namespace(libvirt_uri=[uri]), tmp_path)


def test_run_overlaps_waiting_guests_by_default_the_suite_does_not() -> None:
    """make run's --jobs-per-host is auto (hosts.auto_jobs), the tests' 1; auto is a
    value either takes."""
    assert run.parse_args([]).jobs_per_host == hosts.AUTO
    assert run.parse_args(["--jobs-per-host", "2"]).jobs_per_host == 2
    assert options.shared_options()["--jobs-per-host"]["default"] == 1
    options.check(namespace(jobs_per_host=hosts.AUTO), Path.cwd())


def test_dry_run_slots_are_the_pools(tmp_path: Path, monkeypatch) -> None:
    """The plan's slot count is the one the pool would take (hosts.host_jobs): under
    auto, this machine's for the local daemon and one for a streamed host."""
    monkeypatch.setattr(paths, "RESULTS_DIR", tmp_path)
    args = namespace(accel="tcg", boots=1, jobs_per_host=hosts.AUTO, cap=60.0, timeout=60.0,
                     no_entropy=True, no_clones=True, no_throughput=True)
    local = hosts.local_auto_jobs()[0]
    streamed = "qemu+tcp://192.0.2.1/system"
    text = dryrun.describe(args, [get_profile(QUIET)], ["stock"],
                           [hosts.DEFAULT_URI, streamed], 6)
    assert f", {local + 1} at a time on 2 host(s): " in text, text
    assert hosts.STREAMED_AUTO_WHY in text, text
    assert hosts.host_jobs(streamed, 3) == (3, "--jobs-per-host 3")


def test_check_reads_only_the_options_a_command_has(tmp_path: Path) -> None:
    values = namespace(boots=2)
    options.check(values, tmp_path)
    assert vars(values) == {"boots": 2}
    with pytest.raises(BenchError, match="--boots 0: must be a whole number"):
        options.check(namespace(boots=0, cap=float("nan")), tmp_path)


def test_plan_costs_a_cell_from_earlier_boots_at_this_cap(tmp_path: Path, monkeypatch) -> None:
    """An earlier boot that waited its 60 s cap would wait a 300 s one; one that
    reached its final milestone at 2 s costs what it took."""
    boots = tmp_path / "20260101-000000" / "boots"
    for name, variant, wall, reached in (("a", "crng", 66.0, None), ("b", "stock", 10.0, 2.0)):
        (boots / name).mkdir(parents=True)
        final = "crng_init 3" if variant == "crng" else "crng init done"
        (boots / name / "record.json").write_text(json.dumps({
            "profile": QUIET, "variant": variant, "started_at": 1000.0,
            "ended_at": 1000.0 + wall, "cmdline": "bench.tasks=probe,until bench.until_cap=60",
            "milestones_printk_s": {final: reached} if reached else {}}))
    history = dryrun.earlier_boots(tmp_path)
    assert dryrun.boot_cost(history[(QUIET, "crng")][0], 300) == 306.0
    assert dryrun.boot_cost(history[(QUIET, "stock")][0], 300) == 10.0
    monkeypatch.setattr(paths, "RESULTS_DIR", tmp_path)
    args = namespace(accel="tcg", boots=1, jobs_per_host=1, cap=300.0, timeout=60.0,
                     no_entropy=True, no_clones=True, no_throughput=True)
    text = dryrun.describe(args, [get_profile(QUIET)], ["crng", "stock"], [hosts.DEFAULT_URI], 6)
    assert "estimate: about 5 min, builds not counted (basis: 2 of 2 cell(s) costed from " \
           "2 earlier boot(s)" in text, text


PREVIEWS = ["--dry-run", "--list-profiles", "--list-images"]


@pytest.mark.parametrize("preview", PREVIEWS)
def test_make_run_previews_without_set_up(preview: str) -> None:
    """A preview changes nothing on the host: no scripts/setup.sh (apt, qemu.conf,
    libvirtd restart) in what `make run` would run for it."""
    lines = make_plan("run", RUN_ARGS=preview)
    assert not any("setup.sh" in line for line in lines), lines
    assert any(f"benchlib.commands.run  {preview}" in line for line in lines), lines
    assert any("setup.sh" in line for line in make_plan("run", RUN_ARGS="--boots 1"))


# An unprivileged user (nobody), as setpriv(1) makes one.
NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--"]


def test_make_run_previews_as_a_non_root_user() -> None:
    """The previews run as a user who can change nothing on the host, from a copy of
    the repository that user can only read, and write nothing into it."""
    # Not pytest's tmp_path: its parents are root's alone.
    with tempfile.TemporaryDirectory(prefix="bench-nobody-") as folder:
        previews_as_nobody(Path(folder))


def previews_as_nobody(tmp_path: Path) -> None:
    copy = tmp_path / "repo"
    copy.mkdir()
    tracked = subprocess.run(["git", "-C", str(paths.REPO), "ls-files", "-z"],
                             capture_output=True, check=True).stdout.decode().split("\0")
    for name in filter(None, tracked):
        (copy / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(paths.REPO / name, copy / name)
    for path in [tmp_path, *tmp_path.rglob("*")]:       # readable by all, as a clone is
        path.chmod(path.stat().st_mode | (0o555 if path.is_dir() else 0o444))
    before = sorted(p.relative_to(copy) for p in copy.rglob("*"))
    for preview in PREVIEWS:
        result = subprocess.run([*NOBODY, "make", "-C", str(copy), "run",
                                 f"RUN_ARGS={preview} --accel tcg"],
                                capture_output=True, text=True, timeout=300,
                                env={**os.environ, "HOME": "/nonexistent",
                                     "PYTHONDONTWRITEBYTECODE": "1"})
        assert result.returncode == 0, f"{preview}: {result.stdout}{result.stderr}"
        assert "setup" not in result.stdout, result.stdout
    assert sorted(p.relative_to(copy) for p in copy.rglob("*")) == before


@pytest.mark.parametrize("argv, variants", [
    (["--kernel", "K"], ["custom"]),                                  # the user's alone
    (["--kernel", "K", "--variant", "stock"], ["stock", "custom"]),   # beside stock
    (["--kernel", "K", "--variant", "custom", "--variant", "lrng"], ["custom", "lrng"]),
    ([], None),                                                       # every bench variant
])
def test_run_boots_the_users_kernel_alone_unless_variants_are_named(
        argv: list[str], variants: list[str] | None, tmp_path: Path) -> None:
    (tmp_path / "K").write_bytes(b"")
    args = [str(tmp_path / "K") if a == "K" else a for a in argv]
    parsed = run.parse_args(["--no-budget", *args], tmp_path)
    assert parsed.variant == (variants or run.known_variants()), parsed.variant


def test_run_variant_custom_without_a_kernel_is_named(tmp_path: Path) -> None:
    with pytest.raises(BenchError, match="--variant custom names the kernel of --kernel"):
        run.parse_args(["--variant", "custom"], tmp_path)
