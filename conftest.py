"""Shared fixtures of the bench's test suite.

The harness lives in pytest/benchlib; this file only turns it into fixtures and
command-line options:

  --kernel PATH       test this bzImage instead of the built stock variant
  --profile NAME      restrict profile-parametrized tests to these profiles (repeatable)
  --boots N           boots per profile where a test compares distributions (default 3)
  --accel MODE        auto (probe boot decides), kvm or tcg (default auto)
  --libvirt-uri URI   default qemu:///system
"""
from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Callable, Iterator, Optional

import pytest

sys.path.insert(0, str(Path(__file__).parent / "pytest"))

import libvirt  # noqa: E402

from benchlib import paths  # noqa: E402
from benchlib.accel import resolve_accel  # noqa: E402
from benchlib.errors import NeedsKvm  # noqa: E402
from benchlib.guest import BootRequest, boot, check_accel  # noqa: E402
from benchlib.kernels import check_bzimage, variant_kernel  # noqa: E402
from benchlib.profiles import all_profiles, get_profile  # noqa: E402
from benchlib.record import BootRecord  # noqa: E402


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("bench", "boot-time randomness bench")
    group.addoption("--kernel", type=Path, default=None,
                    help="bzImage to test instead of the built stock variant")
    group.addoption("--profile", action="append", default=[],
                    help="profile(s) for profile-parametrized tests")
    group.addoption("--boots", type=int, default=3,
                    help="boots per profile for distribution comparisons")
    group.addoption("--accel", choices=("auto", "kvm", "tcg"), default="auto",
                    help="accelerator: a probe boot decides under auto")
    group.addoption("--libvirt-uri", default="qemu:///system", help="libvirt connection URI")


@pytest.fixture(scope="session")
def run_dir() -> Path:
    """This run's output folder: every guest's console and data logs stay here."""
    path = paths.RESULTS_DIR / f"pytest-{time.strftime('%Y%m%d-%H%M%S')}"
    path.mkdir(parents=True, exist_ok=True)
    return path


@pytest.fixture(scope="session")
def libvirt_conn(request: pytest.FixtureRequest) -> Iterator[libvirt.virConnect]:
    uri = request.config.getoption("--libvirt-uri")
    try:
        conn = libvirt.open(uri)
    except libvirt.libvirtError as exc:
        pytest.exit(f"cannot connect to libvirt at '{uri}': {exc} (run scripts/setup.sh)", 2)
    yield conn
    conn.close()


@pytest.fixture(scope="session")
def initrd() -> Path:
    path = paths.initramfs()
    if not path.is_file():
        pytest.exit(f"initramfs '{path}' is missing: run 'make fixtures'", 2)
    return path


@pytest.fixture(scope="session")
def kernel_under_test(request: pytest.FixtureRequest) -> tuple[str, Path]:
    """(variant label, bzImage): --kernel PATH, or the built stock variant."""
    user_kernel: Optional[Path] = request.config.getoption("--kernel")
    if user_kernel is not None:
        return "custom", check_bzimage(user_kernel)
    return "stock", variant_kernel("stock")


@pytest.fixture(scope="session")
def accel(request: pytest.FixtureRequest, libvirt_conn: libvirt.virConnect,
          kernel_under_test: tuple[str, Path], initrd: Path, run_dir: Path) -> str:
    mode, why = resolve_accel(request.config.getoption("--accel"), libvirt_conn,
                              kernel_under_test[1], initrd, run_dir)
    print(f"\nbench: guests run under {mode.upper()} ({why})")
    return mode


BootFn = Callable[..., BootRecord]


@pytest.fixture(scope="session")
def boot_guest(libvirt_conn: libvirt.virConnect, initrd: Path, accel: str,
               run_dir: Path, kernel_under_test: tuple[str, Path]) -> BootFn:
    """boot_guest(profile, tasks=[...], variant=None, kernel=None, **request fields).

    Boots one guest and returns its record. A profile this host cannot run is a
    skip that names why; every other failure raises with the stage reached."""

    def _boot(profile: str, tasks: list[str], variant: Optional[str] = None,
              kernel: Optional[Path] = None, **fields: object) -> BootRecord:
        prof = get_profile(profile)
        try:
            check_accel(prof, accel)
        except NeedsKvm as exc:
            pytest.skip(str(exc))
        if variant is None:
            variant, kernel = kernel_under_test
        elif kernel is None:
            kernel = variant_kernel(variant)
        request = BootRequest(profile=prof, variant=variant, kernel=kernel, initrd=initrd,
                              outdir=run_dir, accel=accel, tasks=tasks, **fields)
        return boot(libvirt_conn, request)

    return _boot


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Tests taking `profile_name` run once per profile (or per --profile given)."""
    if "profile_name" in metafunc.fixturenames:
        chosen = metafunc.config.getoption("--profile") or list(all_profiles())
        metafunc.parametrize("profile_name", chosen)
