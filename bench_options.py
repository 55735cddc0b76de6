"""The bench's pytest options, as a plugin: `make test` loads it with
`-p bench_options`, and conftest.py names it in `pytest_plugins`.

Both, because neither is enough alone. pytest reads the command line once before
it loads any conftest, and takes the value of an option it does not know yet as a
test path: with '--kernel /boot/vmlinuz-X' it then loads conftests from /boot
instead of the repository's, and fails with "unrecognized arguments: --kernel". A
plugin named with -p is loaded before that first reading, but only if it can be
imported then, i.e. with the repository's root on sys.path: `python3 -m pytest`
from the root has it there, `pytest-3` and any run from pytest/ do not, and
pytest 7.2 applies the `pythonpath` ini option only after the -p plugins. So
tox.ini does not name it (a plugin that cannot be imported stops pytest), the
Makefile does (it runs pytest from the root), and conftest.py loads it wherever
pytest is started: `pytest -k vmbus` works from the root and from pytest/, and a
path outside the repository after a space (`--kernel /boot/X`) needs `make test`,
`-p bench_options`, or `--kernel=/boot/X`. benchlib/testing/plugin.py (the fixtures)
documents each option.

Every option is checked before anything is collected, built or booted
(benchlib/commands/options.py, as the main job's): a bad value is a usage error (pytest's
exit status 4; `make test` exits 2) naming the option and the value, and relative
paths are resolved against the directory pytest was started from.
`--check-args` stops there: `make test` runs it before it builds.
"""
from __future__ import annotations

import argparse
from pathlib import Path
from typing import Optional, Union

import pytest

from benchlib.commands import options
from benchlib.core.errors import BenchError

# The dests of this plugin's options: the only ones the checks read and rewrite.
DESTS = ("kernel", "modules", "kernel_deb", "profile", "profiles_dir", "boots", "accel",
         "libvirt_uri", "jobs_per_host", "libvirt_pool", "reap", "budget", "debug_kernels",
         "irqsoff_kernels")


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("bench", "boot-time randomness bench")
    options.add_shared(group.addoption, {
        "--kernel": "bzImage to test instead of the built stock variant",
        "--modules": "modules of --kernel's image: the release folder, or one holding "
                     "lib/modules/RELEASE (default: /lib/modules/RELEASE if there)",
        "--kernel-deb": "a linux-image .deb to test: unpacked (never installed), its "
                        "vmlinuz booted with its modules",
        "--profile": "profile(s) for profile-parametrized tests",
        "--profiles-dir": "read the profiles from DIR instead of vm-definitions/",
        "--boots": "boots per profile for distribution comparisons "
                   f"(default {options.DEFAULT_BOOTS})",
        "--accel": "accelerator: a probe boot decides under auto",
        "--libvirt-uri": "a libvirt host to boot on; repeat it to spread the boots over "
                         "several (default qemu:///system)",
        "--jobs-per-host": "boots at a time on each host, across processes (default 1)",
        "--libvirt-pool": "storage pool that receives the kernels on hosts that do not "
                          "share this machine's files (default bench)",
        "--reap": "destroy bench-* domains left running by a killed run",
    })
    group.addoption("--budget", type=Path, default=None,
                    help="time-to-ready budget file: one test per profile x variant "
                         "(e.g. vm-definitions/budgets.toml)")
    group.addoption("--debug-kernels", action="store_true",
                    help="run the debug-kernel tests (lockdep/KASAN builds of every "
                         "variant, built by 'make debug-test')")
    group.addoption("--irqsoff-kernels", action="store_true",
                    help="run the interrupts-off tests (irqsoff-tracer builds of stock and "
                         "lrng, built by 'make irqsoff-test')")
    group.addoption("--check-args", action="store_true",
                    help="check the bench's options and stop: nothing is collected or "
                         "booted ('make test' runs this before it builds)")


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config: pytest.Config) -> Optional[Union[int, pytest.ExitCode]]:
    """The bench's options, checked and normalised (repeats dropped, paths made
    absolute) before the session starts; a bad one is a usage error naming it."""
    if config.option.help:
        return None
    ours = argparse.Namespace(**{dest: getattr(config.option, dest) for dest in DESTS})
    try:
        options.check(ours, config.invocation_params.dir)
    except BenchError as exc:
        raise pytest.UsageError(str(exc)) from None
    for dest in DESTS:
        setattr(config.option, dest, getattr(ours, dest))
    if config.option.check_args:
        print("bench: arguments ok")
        return 0
    return None
