"""The bench's pytest options, as a plugin that tox.ini loads with -p.

They cannot live in conftest.py: pytest reads the command line once before it
loads any conftest, and takes the value of an option it does not know yet as a
test path. With '--kernel /boot/vmlinuz-X' it then loads conftests from /boot
instead of the repository's, and fails with "unrecognized arguments: --kernel".
A plugin named with -p is loaded before that first reading. conftest.py (the
fixtures) documents each option.
"""
from __future__ import annotations

from pathlib import Path

import pytest


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("bench", "boot-time randomness bench")
    group.addoption("--kernel", type=Path, default=None,
                    help="bzImage to test instead of the built stock variant")
    group.addoption("--modules", type=Path, default=None,
                    help="modules of --kernel's image: the release folder, or one holding "
                         "lib/modules/RELEASE (default: /lib/modules/RELEASE if there)")
    group.addoption("--kernel-deb", type=Path, default=None,
                    help="a linux-image .deb to test: unpacked (never installed), its "
                         "vmlinuz booted with its modules")
    group.addoption("--profile", action="append", default=[],
                    help="profile(s) for profile-parametrized tests")
    group.addoption("--profiles-dir", type=Path, default=None,
                    help="read the profiles from DIR instead of vm-definitions/")
    group.addoption("--boots", type=int, default=3,
                    help="boots per profile for distribution comparisons")
    group.addoption("--accel", choices=("auto", "kvm", "tcg"), default="auto",
                    help="accelerator: a probe boot decides under auto")
    group.addoption("--libvirt-uri", action="append", default=[],
                    help="a libvirt host to boot on; repeat it to spread the boots over "
                         "several (default qemu:///system)")
    group.addoption("--jobs-per-host", type=int, default=1,
                    help="boots at a time on each host, across processes (default 1)")
    group.addoption("--libvirt-pool", default="bench",
                    help="storage pool that receives the kernels on hosts that do not "
                         "share this machine's files (default bench)")
    group.addoption("--reap", action="store_true",
                    help="destroy bench-* domains left running by a killed run")
    group.addoption("--budget", type=Path, default=None,
                    help="time-to-ready budget file: one test per profile x variant "
                         "(e.g. vm-definitions/budgets.toml)")
    group.addoption("--debug-kernels", action="store_true",
                    help="run the debug-kernel tests (lockdep/KASAN builds of every "
                         "variant, built by 'make debug-test')")
