"""The suite's own options, as the README writes them: a path anywhere on the
disk after a space (pytest must not take it for a test path), and a user's profile
directory (--profiles-dir), whose profiles the capability-chosen tests boot.

Each case runs the suite in a child pytest from the repository's root, as
`make test` does.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from benchlib.core import paths
from benchlib.core.errors import BadProfile
from benchlib.core.profiles import Needs
from benchlib.testing import plugin

# A child that only collects is quick; one that boots a guest gets this long.
CHILD_TIMEOUT_S = 600
QUIET_TEMPLATE = paths.PROFILE_DIR / "tcg-quiet.xml"
TEAM_PROFILE = "team-quiet"
# A test that boots a quiet profile chosen by capability, and one that needs Hyper-V
# profiles (declared with the profiles marker), which a quiet directory lacks.
BY_CAPABILITY = "pytest/test_stock_rng.py::test_stock_nonblock_eagain_until_crng_init_done[stock]"
LACKING = "pytest/test_vmbus_qemu.py::test_vmbus_invariant_tsc_only_where_profile_asks[no-profile]"


def child_pytest(*args: str, results: Path) -> subprocess.CompletedProcess:
    """pytest as `make test` runs it: from the root, the ini file and rootdir
    pinned, the options plugin loaded with -p."""
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-c", "tox.ini", "--rootdir=.", "-p", "bench_options",
         "-q", "-p", "no:cacheprovider", *args],
        cwd=paths.REPO, capture_output=True, text=True, timeout=CHILD_TIMEOUT_S,
        env={**os.environ, "RESULTS_DIR": str(results)})


@pytest.fixture
def team_dir(tmp_path: Path) -> Path:
    """A user's profile directory outside the repository: one quiet profile."""
    directory = tmp_path / "profiles"
    directory.mkdir()
    shutil.copy(QUIET_TEMPLATE, directory / f"{TEAM_PROFILE}.xml")
    return directory


@pytest.mark.parametrize("option", ["--kernel", "--kernel-deb", "--modules", "--budget",
                                    "--profiles-dir"])
def test_options_take_a_path_outside_the_repository_after_a_space(
        option: str, team_dir: Path, tmp_path: Path) -> None:
    # The path must exist (the options are checked before anything is collected),
    # a folder for --modules; nothing reads the file while collecting.
    value = team_dir if option == "--profiles-dir" else tmp_path / "anything"
    if option == "--budget":
        value.write_text('[ready_s]\ntcg-quiet = 5.0\n')
    elif option == "--modules":
        value.mkdir()
    elif option != "--profiles-dir":
        value.write_bytes(b"")
    result = child_pytest("--collect-only", option, str(value), results=tmp_path / "results")
    assert result.returncode == 0 and "collected" in result.stdout, \
        f"{option} {value}: {result.stdout[-2000:]}{result.stderr[-2000:]}"


def test_profiles_dir_boots_its_profiles_and_skips_what_it_lacks(team_dir: Path,
                                                                tmp_path: Path) -> None:
    results = tmp_path / "results"
    result = child_pytest("--accel=tcg", "-rs", "--profiles-dir", str(team_dir),
                          BY_CAPABILITY, LACKING, results=results)
    output = result.stdout[-3000:] + result.stderr[-2000:]
    assert result.returncode == 0, output
    assert "1 passed, 1 skipped" in result.stdout, output
    assert "no profile of this run has what the test needs: the first with hyperv=True, " \
        "invariant_tsc=True" in result.stdout, output
    booted = [d.name for d in results.glob("pytest-*/bench-*") if d.is_dir()]
    assert booted and all(name.startswith(f"bench-{TEAM_PROFILE}-") for name in booted), \
        f"the child booted {booted}, not only the directory's '{TEAM_PROFILE}'"


def test_profiles_dir_without_what_a_test_needs_skips_it_naming_the_need(
        team_dir: Path, tmp_path: Path) -> None:
    """A test marked profiles(Needs(...)) that no profile of the directory fits is
    one skip saying what it needs, and boots nothing; one the directory fits runs
    on the directory's profile (collected as such). A selection that only skipped
    judged nothing: it fails, saying so."""
    results = tmp_path / "results"
    result = child_pytest("--accel=tcg", "-rs", "--profiles-dir", str(team_dir),
                          "pytest/test_vmbus.py", "-k", "guest_finds_hyperv", results=results)
    output = result.stdout[-3000:] + result.stderr[-2000:]
    assert result.returncode == pytest.ExitCode.TESTS_FAILED, output
    assert "bench: every selected test (3) was skipped: nothing was judged" in result.stdout, \
        output
    assert "3 skipped" in result.stdout and "passed" not in result.stdout, output
    assert ("no profile of this run has what the test needs: hyperv=True, "
            "interrupt_only=True") in result.stdout, output
    assert not list(results.glob("pytest-*/bench-*")), "a skipped test booted a guest"
    fits = child_pytest("--collect-only", "--profiles-dir", str(team_dir),
                        "pytest/test_crng.py", "-k", "nonblock_eagain_below_2", results=results)
    assert f"[{TEAM_PROFILE}]" in fits.stdout, fits.stdout[-2000:]


def test_a_need_naming_no_capability_is_an_error_naming_it() -> None:
    with pytest.raises(BadProfile, match="^no profile capability 'hyprev' "):
        Needs(hyprev=True)


def test_profiles_dir_bad_file_is_a_usage_error_naming_it(team_dir: Path,
                                                          tmp_path: Path) -> None:
    (team_dir / "typo.xml").write_text(
        QUIET_TEMPLATE.read_text().replace("${kernel}", "${kernal}"))
    result = child_pytest("--collect-only", "--profiles-dir", str(team_dir),
                          results=tmp_path / "results")
    assert result.returncode == pytest.ExitCode.USAGE_ERROR, result.stdout + result.stderr
    assert "typo.xml: unknown placeholder $kernal" in result.stderr, result.stderr


# Tests of the bench's own kernels: one that asks for bench_variant, one marked
# benchkernels (a QEMU self-test that boots 'stock'); and what stays: the
# per-variant tests, as 'custom', and the QEMU self-test that boots no kernel.
BENCH_KERNEL_TESTS = ("test_crng_per_node_instances",
                      "test_vmbus_patched_qemu_selftest[linux]")
USER_KERNEL_TESTS = ("test_vmbus_guest_finds_hyperv_and_vmbus[custom-hyperv]",
                     "test_vmbus_patched_qemu_selftest[synic]")


def test_user_kernel_deselects_the_bench_kernels_tests(tmp_path: Path) -> None:
    """With --kernel, the tests of the bench's own kernels are deselected (never
    skips that would hide in the count), and the header says why."""
    (tmp_path / "bzImage").write_bytes(b"")     # must exist; collecting never reads it
    result = child_pytest("--collect-only", "--kernel", str(tmp_path / "bzImage"),
                          "pytest/test_crng.py", "pytest/test_vmbus.py",
                          "pytest/test_vmbus_qemu.py", results=tmp_path / "results")
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-2000:]
    assert "tests of the bench's own kernels (or of Debian's cloud kernel) deselected: " \
        "--kernel" in output, output[-2000:]
    for name in BENCH_KERNEL_TESTS:
        assert name not in output, f"{name} collected with --kernel"
    for name in USER_KERNEL_TESTS:
        assert name in output, f"{name} not collected with --kernel"
    ours = child_pytest("--collect-only", "pytest/test_crng.py", "pytest/test_vmbus_qemu.py",
                        results=tmp_path / "results")
    for name in BENCH_KERNEL_TESTS:
        assert name in ours.stdout, f"{name} not collected for the bench's kernels"


# The distro kernel's tests boot Debian's cloud kernel package (cloud_kernel).
DISTRO_TEST = "test_distro_kernel_gets_virtio_rng_from_its_modules"


def test_user_kernel_deselects_the_distro_kernel_tests_unless_it_is_that_kernel(
        tmp_path: Path) -> None:
    """With --kernel K, a test that would boot Debian's cloud kernel boots a kernel
    the user did not name: it is deselected (it was run, on the cloud kernel); with
    --kernel-deb naming that package (make cloud-test) it stays."""
    (tmp_path / "bzImage").write_bytes(b"")
    other = child_pytest("--collect-only", "--kernel", str(tmp_path / "bzImage"),
                         "pytest/test_distro_kernel.py", results=tmp_path / "results")
    assert other.returncode == 0 and DISTRO_TEST not in other.stdout, other.stdout[-2000:]
    same = child_pytest("--collect-only", "--kernel-deb", str(paths.distro_deb()),
                        "pytest/test_distro_kernel.py", results=tmp_path / "results")
    assert same.returncode == 0 and DISTRO_TEST in same.stdout, same.stdout[-2000:]


# Debian's pytest scripts, where installed: they do not put the working directory
# on sys.path, as `python3 -m pytest` does.
PYTEST_SCRIPTS = [s for s in ("pytest-3", "pytest") if shutil.which(s)]


def collected(command: list[str], cwd: Path, tmp_path: Path) -> set[str]:
    """The node ids `command --collect-only -q` prints (relative to the rootdir,
    the repository, wherever it ran); the run must exit 0."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTEST_ADDOPTS")}
    result = subprocess.run([*command, "--collect-only", "-q", "-p", "no:cacheprovider"],
                            cwd=cwd, capture_output=True, text=True, timeout=CHILD_TIMEOUT_S,
                            env={**env, "RESULTS_DIR": str(tmp_path / "results")})
    assert result.returncode == 0, \
        f"{' '.join(command)} in {cwd}: exit {result.returncode}\n" \
        f"{result.stdout[-2000:]}{result.stderr[-2000:]}"
    return {line for line in result.stdout.splitlines() if "::" in line}


def test_hyperv_bus_selection_works_from_the_root_and_from_pytest_dir(tmp_path: Path) -> None:
    # (Named without "vmbus": -k vmbus would select this test too.)
    """`pytest -k vmbus` as the README writes it, from the root (python3 -m pytest and
    Debian's scripts) and from pytest/, collects one non-empty set; `-m vmbus` the
    same tests but those -k picks only by a parameter id (the novmbus patch's lint)."""
    python = [sys.executable, "-m", "pytest"]
    from_root = collected([*python, "-k", "vmbus"], paths.REPO, tmp_path)
    assert any(i.startswith("pytest/test_vmbus.py::") for i in from_root), from_root
    assert any(i.startswith("pytest/test_vmbus_qemu.py::") for i in from_root), from_root
    assert collected([*python, "-k", "vmbus"], paths.REPO / "pytest", tmp_path) == from_root
    for script in PYTEST_SCRIPTS:
        assert collected([script, "-k", "vmbus"], paths.REPO, tmp_path) == from_root, script
        assert collected([script, "-k", "vmbus"], paths.REPO / "pytest", tmp_path) \
            == from_root, script
    named = {i for i in from_root if "vmbus" in i.split("::")[-1].split("[")[0]}
    assert collected([*python, "-m", "vmbus"], paths.REPO, tmp_path) == named
    by_id_only = from_root - named
    assert all(i.startswith("pytest/test_patches.py::") for i in by_id_only), by_id_only


def test_variant_marker_selects_its_module(tmp_path: Path) -> None:
    """-m crng: every test of pytest/test_crng.py, and nothing else."""
    python = [sys.executable, "-m", "pytest"]
    marked = collected([*python, "-m", "crng"], paths.REPO, tmp_path)
    assert marked and marked == collected([*python, "pytest/test_crng.py"], paths.REPO, tmp_path)


class FakeConfig:
    """What nothing_judged() reads of a pytest config: --profile and the stash."""

    def __init__(self, profiles: list[str], judged_on: set[str]) -> None:
        self.profiles = profiles
        self.stash = {plugin.PROFILES_JUDGED: judged_on,
                      plugin.PROFILE_OF_TEST: {"t[tcg-quiet]": "tcg-quiet"}}

    def getoption(self, name: str) -> list[str]:
        assert name == "--profile"
        return self.profiles


@pytest.mark.parametrize("stats, profiles, judged_on, fails", [
    ({"skipped": [1, 2]}, [], set(), "every selected test (2) was skipped"),
    ({"skipped": [1], "passed": [2]}, [], set(), None),
    ({"passed": [1]}, ["tcg-quiet"], {"tcg-quiet"}, None),
    ({"passed": [1], "skipped": [2]}, ["tcg-quiet", "hyperv"], {"tcg-quiet"},
     "--profile hyperv: no selected test ran on it"),
    ({"failed": [1]}, [], set(), None),
])
def test_a_run_that_judged_nothing_it_was_asked_to_fails(stats: dict, profiles: list[str],
                                                          judged_on: set[str],
                                                          fails: str | None) -> None:
    reasons = plugin.nothing_judged(FakeConfig(profiles, judged_on), stats)
    assert (reasons[0].startswith(fails) if fails else reasons == []), reasons
