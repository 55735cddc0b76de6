"""The bench's pytest plugin: the suite's shared fixtures and hooks.

The root conftest.py only loads it (and bench_options.py, the options' checks);
the harness lives in the rest of benchlib, and this module only turns it into
fixtures, hooks and the options' meaning:

  --kernel PATH       test this bzImage instead of the built stock variant
  --modules DIR       the modules of --kernel's image (default /lib/modules/RELEASE)
  --kernel-deb PKG    test the kernel in this linux-image .deb (unpacked, not installed)
  --profile NAME      restrict profile-parametrized tests to these profiles (repeatable)
  --profiles-dir DIR  read the profiles from DIR instead of vm-definitions/: tests that
                      choose profiles by capability run on DIR's; a test of a named
                      bench profile DIR lacks is skipped, naming it
  --boots N           boots per profile where a test compares distributions (default 3)
  --accel MODE        auto (probe boot decides), kvm or tcg (default auto)
  --libvirt-uri URI   a libvirt host to boot on (repeatable; default qemu:///system):
                      boots go to the hosts in turn, each takes a free slot
  --jobs-per-host N   boots at a time on each host, across processes (default 1)
  --libvirt-pool NAME storage pool for uploads to hosts that do not share our files
  --budget FILE       turn each time-to-ready budget into a test (test_ready_within_budget)
  --debug-kernels     also run the debug-kernel tests (VARIANT+debug builds: make debug-test)
  --irqsoff-kernels   also run the interrupts-off tests (VARIANT+irqsoff builds: make irqsoff-test)
"""
from __future__ import annotations

import shutil
import time
from pathlib import Path
from typing import Callable, Iterator, Optional

import libvirt
import pytest

from benchlib.report import budgets
from benchlib.core import paths
from benchlib.boot import plan
from benchlib.boot.accel import resolve_accel
from benchlib.core.errors import BadProfile, BenchError, Skip, UnknownProfile
from benchlib.boot.guest import Guest, boot, clear_stale, install_signal_handlers, reap_survivors
from benchlib.boot.hosts import DEFAULT_URI, HostPool
from benchlib.core.kernels import variant_kernel
from benchlib.core.profiles import Needs, all_profiles, get_profile, profiles_needed, use_directory
from benchlib.core.bootrecord import BootRecord
from benchlib.core.userkernel import KernelUnderTest, bench_kernel, user_kernel
from benchlib.core.variants import CUSTOM, known_variants


@pytest.fixture(scope="session")
def run_dir() -> Path:
    """This run's output folder: every guest's console and data logs stay here."""
    path = paths.RESULTS_DIR / f"pytest-{time.strftime('%Y%m%d-%H%M%S')}"
    path.mkdir(parents=True, exist_ok=True)
    return path


def pytest_configure(config: pytest.Config) -> None:
    """--profiles-dir DIR: every profile lookup reads DIR from now on, before the test
    modules (whose profile lists come from capabilities) are collected. A bad file is
    a usage error naming it, one line per file."""
    directory: Optional[Path] = config.getoption("--profiles-dir")
    if directory is None:
        return
    try:
        use_directory(directory)
        all_profiles()
    except BadProfile as exc:
        raise pytest.UsageError(str(exc)) from None


def pytest_sessionstart(session: pytest.Session) -> None:
    install_signal_handlers()


@pytest.fixture(scope="session")
def host_pool(request: pytest.FixtureRequest) -> Iterator[HostPool]:
    """The libvirt hosts (--libvirt-uri, repeatable) and their slots (--jobs-per-host),
    shared with every other process that boots bench guests here (pytest-xdist's
    workers, another run); at the end of the session, any domain this run created
    that still exists fails the run (and is destroyed)."""
    config = request.config
    try:
        pool = HostPool(config.getoption("--libvirt-uri") or [DEFAULT_URI],
                        config.getoption("--jobs-per-host"), config.getoption("--libvirt-pool"))
    except BenchError as exc:
        pytest.exit(str(exc), 2)
    for line in clear_stale(pool.hosts, config.getoption("--reap")):
        print(f"\nbench: {line}")
    yield pool
    leaked = reap_survivors(pool.hosts)
    pool.close()
    if leaked:
        pytest.fail(f"guests left running after the tests: {' '.join(leaked)}", pytrace=False)


@pytest.fixture(scope="session")
def libvirt_conn(host_pool: HostPool) -> libvirt.virConnect:
    """The first host's connection: for tests that manage a domain themselves."""
    return host_pool.first.conn


@pytest.fixture(scope="session")
def initrd() -> Path:
    problem = paths.initramfs_problem()
    if problem:
        pytest.exit(problem, 2)
    return paths.initramfs()


def names_the_distro_kernel(config: pytest.Config) -> bool:
    """Whether the user's kernel is Debian's cloud kernel package the distro tests
    boot (make cloud-test): they then boot the kernel named, and stay."""
    deb = config.getoption("--kernel-deb")
    return deb is not None and Path(deb).resolve() == paths.distro_deb().resolve()


def users_kernel_option(config: pytest.Config) -> Optional[str]:
    """'--kernel PATH' or '--kernel-deb PKG' as given, or None: the bench's own kernels."""
    for option in ("--kernel", "--kernel-deb"):
        value = config.getoption(option)
        if value is not None:
            return f"{option} {value}"
    return None


@pytest.fixture(scope="session")
def kernel_under_test(request: pytest.FixtureRequest,
                      tmp_path_factory: pytest.TempPathFactory) -> Iterator[KernelUnderTest]:
    """--kernel PATH [--modules DIR] or --kernel-deb PKG (as 'custom'), or the built
    stock variant. A package is unpacked for the session and removed after it."""
    config = request.config
    if users_kernel_option(config) is None and config.getoption("--modules") is None:
        yield bench_kernel("stock", variant_kernel("stock"))
        return
    unpack_root = tmp_path_factory.mktemp("kernel")
    try:
        kernel = user_kernel(config.getoption("--kernel"), config.getoption("--modules"),
                             config.getoption("--kernel-deb"), unpack_root)
    except BenchError as exc:
        pytest.exit(str(exc), 2)
    print(f"\nbench: kernel under test: {kernel.describe()}")
    try:
        yield kernel
    finally:
        shutil.rmtree(unpack_root, ignore_errors=True)


@pytest.fixture(scope="session")
def cloud_kernel(tmp_path_factory: pytest.TempPathFactory) -> KernelUnderTest:
    """Debian 12's cloud kernel as it ships (build/distro/, `make distro-kernel`),
    unpacked for the session: a modular kernel with its own config."""
    deb = paths.distro_deb()
    assert deb.is_file(), f"{deb} is missing: 'make distro-kernel' fetches it"
    kernel = user_kernel(None, None, deb, tmp_path_factory.mktemp("cloud-kernel"))
    assert kernel.modules is not None and kernel.config is not None, kernel.describe()
    assert kernel.config.get("CONFIG_HW_RANDOM_VIRTIO") == "m", \
        f"{deb} builds virtio-rng in: the distro tests want a modular kernel"
    return kernel


@pytest.fixture(scope="session")
def accel(request: pytest.FixtureRequest, libvirt_conn: libvirt.virConnect,
          initrd: Path, run_dir: Path) -> str:
    mode, why = resolve_accel(request.config.getoption("--accel"), libvirt_conn,
                              initrd, run_dir)
    print(f"\nbench: guests run under {mode.upper()} ({why})")
    return mode


@pytest.fixture(scope="session")
def bench_variant(request: pytest.FixtureRequest) -> Callable[[str], str]:
    """bench_variant(name) -> name, for tests of one of the bench's own variants;
    with --kernel such a test is skipped, naming why: it never boots another kernel."""
    given = users_kernel_option(request.config)

    def _variant(name: str) -> str:
        if given is not None:
            pytest.skip(f"tests the bench's '{name}' variant; {given} was given")
        return name

    return _variant


BootFn = Callable[..., BootRecord]


@pytest.fixture(scope="session")
def boot_guest(libvirt_conn: libvirt.virConnect, host_pool: HostPool, initrd: Path,
               accel: str, run_dir: Path, kernel_under_test: KernelUnderTest,
               request: pytest.FixtureRequest) -> BootFn:
    """boot_guest(profile, tasks=[...], variant=None, kernel=None, under_test=None,
    pool=None, meanwhile=None, **request fields): variant None is the kernel under
    test (or under_test's); pool, a HostPool of the test's own (more slots) instead
    of the session's; meanwhile(guest), what the host does to the running guest
    (guest.boot's).

    Boots one guest and returns its record. A profile this host cannot run, or a
    user's kernel whose config lacks what the boot needs, is a skip that names why;
    every other failure raises with the stage reached."""
    profiles_dir: Optional[Path] = request.config.getoption("--profiles-dir")

    def _boot(profile: str, tasks: list[str], variant: Optional[str] = None,
              kernel: Optional[Path] = None, under_test: Optional[KernelUnderTest] = None,
              pool: Optional[HostPool] = None,
              meanwhile: Optional[Callable[[Guest], None]] = None,
              **fields: object) -> BootRecord:
        try:
            prof = get_profile(profile)
        except UnknownProfile:
            if profiles_dir is None:
                raise
            pytest.skip(f"profile '{profile}' is not in --profiles-dir {profiles_dir}")
        if under_test is None and (variant is None or variant == CUSTOM):
            under_test = kernel_under_test
        try:
            boot_request = plan.request(prof, outdir=run_dir, accel=accel, tasks=tasks,
                                        variant=None if under_test else variant,
                                        kernel=None if under_test else kernel,
                                        under_test=under_test, initrd=initrd,
                                        **fields)
        except Skip as exc:
            pytest.skip(str(exc))
        with (pool or host_pool).lease() as lease:
            return boot(libvirt_conn, boot_request, lease=lease, meanwhile=meanwhile)

    return _boot


PROFILE_PARAMS = ("profile", "profile_name")
# The one parameter of a test marked profiles(...) that no profile of the run fits:
# skipped, saying what it needs.
NO_PROFILE = "no-profile"


# Opt-in tests: their marker, the option that runs them, and why they are not run
# by default (the skip's reason names how to run them).
OPT_IN = {
    "debugkernel": ("--debug-kernels",
                    "debug kernels are opt-in: 'make debug-test' builds VARIANT+debug "
                    "(a full KASAN build each) and runs these tests with --debug-kernels"),
    "irqsoffkernel": ("--irqsoff-kernels",
                      "interrupts-off kernels are opt-in: 'make irqsoff-test' builds "
                      "VARIANT+irqsoff (a full kernel build for stock) and runs these "
                      "tests with --irqsoff-kernels"),
}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Opt-in tests are skipped, naming how to run them, before any fixture (or boot)
    is set up for them; --profile P restricts every profile-parametrized test to the
    profiles named."""
    for marker, (option, reason) in OPT_IN.items():
        if config.getoption(option):
            continue
        for item in items:
            if item.get_closest_marker(marker):
                item.add_marker(pytest.mark.skip(reason=reason))
    if config.getoption("--profiles-dir") is not None:
        skip_profiles_not_in(config.getoption("--profiles-dir"), items)
    deselect_bench_kernel_tests(config, items)
    chosen = config.getoption("--profile")
    if not chosen:
        return
    for name in chosen:
        try:
            get_profile(name)   # an unknown profile is an error, not an empty run
        except UnknownProfile as exc:
            raise pytest.UsageError(str(exc)) from None
    keep, drop = [], []
    for item in items:
        value = item_profile(item)
        (drop if value is not None and value not in chosen else keep).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


BENCH_KERNEL_TESTS = pytest.StashKey[int]()


def deselect_bench_kernel_tests(config: pytest.Config, items: list[pytest.Item]) -> None:
    """With a user's kernel, the tests of the bench's own kernels (those that ask
    for bench_variant, or are marked benchkernels) and those of Debian's cloud
    kernel (cloud_kernel, unless it is the kernel named) are not part of the run:
    they would boot a kernel the user did not name. The header says how many were
    left out, and why."""
    if users_kernel_option(config) is None:
        return
    keep, drop = [], []
    for item in items:
        fixtures = getattr(item, "fixturenames", ())
        ours = "bench_variant" in fixtures \
            or item.get_closest_marker("benchkernels") is not None \
            or ("cloud_kernel" in fixtures and not names_the_distro_kernel(config))
        (drop if ours else keep).append(item)
    config.stash[BENCH_KERNEL_TESTS] = len(drop)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


def pytest_report_collectionfinish(config: pytest.Config) -> Optional[str]:
    dropped = config.stash.get(BENCH_KERNEL_TESTS, 0)
    if not dropped:
        return None
    return (f"bench: {dropped} tests of the bench's own kernels (or of Debian's cloud "
            f"kernel) deselected: {users_kernel_option(config)} names the kernel under test")


def item_profile(item: pytest.Item) -> Optional[str]:
    """The profile a parametrized test runs on, or None."""
    params = getattr(item, "callspec", None)
    return next((params.params[p] for p in PROFILE_PARAMS
                 if params and p in params.params), None)


def skip_profiles_not_in(directory: Path, items: list[pytest.Item]) -> None:
    """With --profiles-dir, a test written for one of the bench's own profiles by
    name (hyperv, tcg-rdrand...) that DIR does not have is skipped, saying so."""
    known = set(all_profiles())
    for item in items:
        name = item_profile(item)
        if name is not None and name not in known and name != NO_PROFILE:
            item.add_marker(pytest.mark.skip(
                reason=f"profile '{name}' is not in --profiles-dir {directory}"))


def budget_cases(config: pytest.Config) -> list:
    """(profile, variant, seconds) per budget and kernel under test: the bench's
    variants, or with --kernel the user's only; --profile restricts the profiles."""
    path: Optional[Path] = config.getoption("--budget")
    if path is None:
        return [pytest.param(None, marks=pytest.mark.skip(
            reason="no --budget FILE given (e.g. --budget vm-definitions/budgets.toml)"))]
    try:
        found = budgets.load(path)
    except BenchError as exc:
        raise pytest.UsageError(str(exc)) from None
    kernels = [CUSTOM] if users_kernel_option(config) else known_variants()
    chosen = config.getoption("--profile")
    return [pytest.param((profile, variant, seconds), id=f"{profile}-{variant}")
            for profile, seconds in found.items() if not chosen or profile in chosen
            for variant in kernels]


def needed_profiles(marker: pytest.Mark) -> list:
    """The `profile` parameters of a test marked profiles(*needs): every profile of
    the run that has what one of the Needs asks, or, when none has, one skipped
    parameter saying what was needed."""
    needs: tuple[Needs, ...] = marker.args
    if not needs or not all(isinstance(need, Needs) for need in needs):
        raise pytest.UsageError(f"@pytest.mark.profiles takes benchlib.core.profiles.Needs, "
                                f"got {needs!r}")
    names = profiles_needed(needs)
    if names:
        return names
    wanted = "; or ".join(str(need) for need in needs)
    return [pytest.param(NO_PROFILE, marks=pytest.mark.skip(
        reason=f"no profile of this run has what the test needs: {wanted}"))]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Tests marked profiles(*needs) run once per profile that has what they need;
    tests taking `profile_name` once per profile (or per --profile given); tests
    taking `variant` once per bench variant, or with --kernel once, on the user's
    kernel only: no such test ever boots a kernel the user did not name."""
    if "profile_name" in metafunc.fixturenames:
        chosen = metafunc.config.getoption("--profile") or list(all_profiles())
        metafunc.parametrize("profile_name", chosen)
    if "budget_case" in metafunc.fixturenames:
        metafunc.parametrize("budget_case", budget_cases(metafunc.config))
    if "variant" in metafunc.fixturenames:
        given = users_kernel_option(metafunc.config)
        metafunc.parametrize("variant", [CUSTOM] if given else known_variants())
    # Last, as a parametrize mark would be: ids read variant-profile.
    marker = metafunc.definition.get_closest_marker("profiles")
    if marker is not None:
        metafunc.parametrize("profile", needed_profiles(marker))


# ---- A run that judged nothing is not green ------------------------------------------
#
# A CI job gates on the exit code. A selection whose every test skipped (a user's
# kernel without an option the tests need, a profile this host cannot run), or a
# profile named with --profile on which no test ran, judged nothing: that fails the
# run, with what it did not judge said last. Each skip's reason is in pytest's short
# summary (-ra, tox.ini).

JUDGED = ("passed", "failed", "error", "xfailed", "xpassed")
PROFILE_OF_TEST = pytest.StashKey[dict[str, Optional[str]]]()
PROFILES_JUDGED = pytest.StashKey[set[str]]()


@pytest.hookimpl(trylast=True)
def pytest_collection_finish(session: pytest.Session) -> None:
    session.config.stash[PROFILE_OF_TEST] = {item.nodeid: item_profile(item)
                                             for item in session.items}
    session.config.stash[PROFILES_JUDGED] = set()


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    config = _CONFIG.get("config")
    if config is None or report.when != "call" or report.outcome not in ("passed", "failed"):
        return
    profile = config.stash.get(PROFILE_OF_TEST, {}).get(report.nodeid)
    if profile is not None:
        config.stash.setdefault(PROFILES_JUDGED, set()).add(profile)


_CONFIG: dict[str, pytest.Config] = {}


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config: pytest.Config) -> None:
    _CONFIG["config"] = config


def nothing_judged(config: pytest.Config, stats: dict[str, list]) -> list[str]:
    """Why the run judged nothing it was asked to, one line each; empty when it did."""
    judged = sum(len(stats.get(kind, [])) for kind in JUDGED)
    skipped = len(stats.get("skipped", []))
    reasons = []
    if skipped and not judged:
        reasons.append(f"every selected test ({skipped}) was skipped: nothing was judged")
    elif judged and config.stash.get(PROFILE_OF_TEST, {}):
        # (Known only where this process collected the tests: not under xdist's
        # controller, whose workers collect.)
        ran_on = config.stash.get(PROFILES_JUDGED, set())
        reasons += [f"--profile {name}: no selected test ran on it (skipped or deselected)"
                    for name in (config.getoption("--profile") or []) if name not in ran_on]
    return reasons


NOT_JUDGED = pytest.StashKey[list[str]]()


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if exitstatus != pytest.ExitCode.OK or reporter is None:
        return
    reasons = nothing_judged(session.config, reporter.stats)
    session.config.stash[NOT_JUDGED] = reasons
    if reasons:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter, config: pytest.Config) -> None:
    for reason in config.stash.get(NOT_JUDGED, []):
        terminalreporter.write_line(f"bench: {reason}; that is not a pass (the skips' "
                                    "reasons are in the short summary)", red=True)
