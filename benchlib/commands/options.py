"""The bench's command-line arguments, checked in one place, before anything is
built or booted: the main job (benchlib.commands.run), the soak (benchlib.commands.soak) and the
test suite's options plugin (bench_options.py) all call check().

  numbers     --boots and --jobs-per-host are whole numbers of at least 1
              (--jobs-per-host may also be auto: hosts.auto_jobs);
              --cap and --timeout a finite number of seconds above 0
  repeatable  --variant, --profile, --libvirt-uri: each value once, in the order
              given (a repeated --profile does not double the matrix)
  paths       --kernel, --modules, --kernel-deb, --budget, --profiles-dir are
              resolved against the directory the command was started from (make's:
              the directory make was called from) and must exist; an error names
              the resolved path
  URIs        --libvirt-uri is scheme://host/path or scheme:///path
  names       every --profile is in the profile directory; every --image is a recipe
              (vm-definitions/images/NAME.toml, or a .toml path); every --variant is a
              variant (with its flavour, VARIANT+FLAVOUR) kernel/build.sh knows,
              and where nothing will build it (--no-build, the soak's run) one
              whose kernel is built and current

A bad value is a BadArgument (or the error of the thing it names: BadKernel,
BadProfile, ...), one line naming the option and the value: benchlib.core.cli turns it
into exit status 2, the plugin into a pytest usage error.
"""
from __future__ import annotations

import argparse
import math
import re
from pathlib import Path
from typing import Any, Callable, Iterable, NoReturn, Optional

from ..images import images
from ..report.budgets import BadBudget
from ..core.errors import BadKernel, BadProfile, BenchError
from ..boot.hosts import AUTO
from ..core.kernels import inputs_fingerprint, variant_kernel
from ..core.profiles import all_profiles, get_profile
from ..boot.remote import DEFAULT_POOL
from ..core.variants import CUSTOM, load as load_variant


class BadArgument(BenchError):
    """A command-line value out of range or of the wrong form, named with its option."""


class ArgumentParser(argparse.ArgumentParser):
    """argparse, with its errors (an unknown option, 'abc' for a number) as one
    BadArgument line instead of the usage text, and no abbreviated options: the
    Makefile looks for --dry-run, --no-build and --list-profiles as written."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        raise BadArgument(message)


# Option (its argparse dest) -> what a value must be.
WHOLE_AT_LEAST_1 = ("boots", "jobs_per_host")
POSITIVE_SECONDS = ("cap", "timeout")
REPEATABLE = ("variant", "profile", "libvirt_uri", "image")
# dest -> (error class, what the path is, a file (True) or a folder (False))
PATHS: dict[str, tuple[type[BenchError], str, bool]] = {
    "kernel": (BadKernel, "kernel image", True),
    "modules": (BadKernel, "modules folder", False),
    "kernel_deb": (BadKernel, "kernel package", True),
    "budget": (BadBudget, "budget file", True),
    "profiles_dir": (BadProfile, "profile directory", False),
}
# What libvirt calls a URI: driver[+transport]://[user@][host][:port]/[path][?extra]
# (qemu:///system, qemu+ssh://root@host/system, test:///default).
LIBVIRT_URI = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^\s/]*/\S*")
_UNSET = object()


# The options the main job (benchlib.commands.run) and the test suite (bench_options.py)
# share, with their one default each; the soak takes --profile and --libvirt-uri.
# Each command gives its own help text (--kernel adds a kernel to the main job's
# matrix, and replaces stock in the tests).
DEFAULT_BOOTS = 3


def shared_options() -> dict[str, dict[str, Any]]:
    """Flag -> the add_argument()/addoption() keywords but help; new lists each call."""
    return {
        "--kernel": {"type": Path, "default": None},
        "--modules": {"type": Path, "default": None},
        "--kernel-deb": {"type": Path, "default": None},
        "--profile": {"action": "append", "default": []},
        "--profiles-dir": {"type": Path, "default": None},
        "--boots": {"type": int, "default": DEFAULT_BOOTS},
        "--accel": {"choices": ("auto", "kvm", "tcg"), "default": "auto"},
        "--libvirt-uri": {"action": "append", "default": []},
        "--jobs-per-host": {"type": jobs_value, "default": 1},
        "--libvirt-pool": {"default": DEFAULT_POOL},
        "--reap": {"action": "store_true"},
    }


def add_shared(add: Callable[..., Any], helps: dict[str, str]) -> None:
    """Add the shared options named in `helps`, each with that help, through `add`
    (an ArgumentParser's add_argument or a pytest group's addoption)."""
    specs = shared_options()
    unknown = sorted(set(helps) - set(specs))
    if unknown:
        raise ValueError(f"not shared options: {unknown}")
    for name, text in helps.items():
        add(name, help=text, **specs[name])


def flag(dest: str) -> str:
    """The option a dest comes from: jobs_per_host -> --jobs-per-host."""
    return "--" + dest.replace("_", "-")


def jobs_value(text: str) -> int | str:
    """--jobs-per-host's value: a number, or the text as given (auto, or what
    check() refuses, naming it)."""
    try:
        return int(text)
    except ValueError:
        return text


def whole_at_least_1(dest: str, value: int | str) -> int | str:
    if dest == "jobs_per_host" and value == AUTO:
        return value
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise BadArgument(f"{flag(dest)} {value}: must be a whole number, at least 1"
                          + (", or auto" if dest == "jobs_per_host" else ""))
    return value


def positive_seconds(dest: str, value: float) -> float:
    if not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        shown = f"{value:g}" if isinstance(value, (int, float)) else repr(value)
        raise BadArgument(f"{flag(dest)} {shown}: must be a finite number of seconds "
                          "above 0")
    return float(value)


def once_each(values: list[str]) -> list[str]:
    """The values in the order given, each once."""
    return list(dict.fromkeys(values))


def libvirt_uri(uri: str) -> str:
    if not LIBVIRT_URI.fullmatch(uri):
        raise BadArgument(f"--libvirt-uri '{uri}': not a libvirt URI (scheme:///path or "
                          "scheme://host/path, e.g. qemu:///system)")
    return uri


def existing_path(dest: str, value: Path, cwd: Path) -> Path:
    """The path resolved against cwd; its own error class when it is not there."""
    error, what, is_file = PATHS[dest]
    path = (cwd / Path(value).expanduser()).resolve()
    if not path.exists():
        raise error(f"{flag(dest)}: {what} '{path}' does not exist")
    if is_file and not path.is_file():
        raise error(f"{flag(dest)}: {what} '{path}' is not a file")
    if not is_file and not path.is_dir():
        raise error(f"{flag(dest)}: {what} '{path}' is not a folder")
    return path


def check_variant(name: str, built: bool) -> None:
    """A variant the bench knows (its metadata reads, its flavour exists); with
    `built`, one whose kernel is built from its inputs as they are now."""
    load_variant(name)
    if built:
        try:
            variant_kernel(name)
        except BadKernel as exc:
            raise BadKernel(f"--variant {name}: {exc}") from None
    else:
        inputs_fingerprint(name)    # kernel/build.sh refuses an unknown flavour


def check(values: argparse.Namespace, cwd: Path, built: Optional[bool] = None) -> None:
    """Check, and normalise in place, whichever of the bench's options `values`
    has (each command has some of them): numbers in range, repeated values once,
    paths resolved against cwd, URIs, profile and variant names. `built` says
    whether the variants must be built already (default: --no-build given).
    Raises a BenchError naming the first bad option and value."""
    def each(names: Iterable[str], fix: Callable[[str, Any], Any]) -> None:
        for dest in names:
            value = getattr(values, dest, _UNSET)
            if value is not _UNSET and value is not None:
                setattr(values, dest, fix(dest, value))

    each(WHOLE_AT_LEAST_1, whole_at_least_1)
    each(POSITIVE_SECONDS, positive_seconds)
    each(REPEATABLE, lambda dest, v: v if isinstance(v, str) else once_each(list(v)))
    each(("libvirt_uri",), lambda dest, v: libvirt_uri(v) if isinstance(v, str)
         else [libvirt_uri(uri) for uri in v])
    paths = {dest: spec for dest, spec in PATHS.items()
             if not (dest == "budget" and getattr(values, "no_budget", False))}
    each(paths, lambda dest, v: existing_path(dest, v, cwd))
    profiles_dir: Optional[Path] = getattr(values, "profiles_dir", None)
    if profiles_dir is not None:
        if not any(profiles_dir.glob("*.xml")):
            raise BadProfile(f"--profiles-dir: profile directory '{profiles_dir}' has no "
                             "*.xml profile")
        all_profiles(profiles_dir)          # BadProfile naming each bad file, one a line
    for name in getattr(values, "profile", None) or []:
        get_profile(name, profiles_dir)     # UnknownProfile naming it and the known ones
    if getattr(values, "image", None):
        values.image = [str(cwd / n) if n.endswith(".toml") else n for n in values.image]
        for name in values.image:
            images.load(name)               # BadImage naming it and the known ones
    if built is None:
        built = bool(getattr(values, "no_build", False))
    for name in getattr(values, "variant", None) or []:
        if name != CUSTOM:                  # the user's kernel: --kernel's checks
            check_variant(name, built)
