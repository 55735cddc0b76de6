"""kernel/build.sh is safe to run twice at once (the second waits for the first),
and the harness boots only a kernel built from today's inputs."""
from __future__ import annotations

import contextlib
import difflib
import fcntl
import re
import secrets
import shutil
import subprocess
import time
from pathlib import Path
from typing import Iterator

import pytest

from benchlib.core import paths
from benchlib.core.errors import BadKernel
from benchlib.core.kernels import inputs_fingerprint, variant_kernel

# How long the second build is watched while the lock is held.
HELD_S = 3
VARIANT = "stock"
# A test-only variant on this parent, changing one message of this file.
TEST_PARENT = "crng"
PATCHED_FILE = "drivers/char/random.c"
MESSAGE, CHANGED = '"crng init done\\n"', '"crng init done (throwaway)\\n"'
# A variant with a base and a fragment of its own: an option only random.c reads.
BASE = "stock"
BASE_OPTION = "CONFIG_RANDOM_TRUST_BOOTLOADER=y"
# A whole tree is about 1,300 compilations (from ccache or not); one file's change
# is a few dozen (the file, the version stamp, the boot image's own objects).
INCREMENTAL_MAX_COMPILATIONS = 100


def test_build_waits_for_a_concurrent_build() -> None:
    lock = paths.BUILD_DIR / ".build.lock"
    lock.parent.mkdir(parents=True, exist_ok=True)
    with lock.open("w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        build = subprocess.Popen([str(paths.KERNEL_DIR / "build.sh"), VARIANT],
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        time.sleep(HELD_S)
        still_waiting = build.poll() is None
        fcntl.flock(held, fcntl.LOCK_UN)
    _, err = build.communicate(timeout=1200)
    assert still_waiting, f"build.sh ran while another build held the lock: {err}"
    assert "waiting for another kernel build" in err, err
    assert build.returncode == 0, err


def _fake_build(build_dir: Path, variant: str, image: bytes, fingerprint: str) -> Path:
    """A built-looking variant: a real bzImage and a fingerprint."""
    out = build_dir / "kernel" / variant
    out.mkdir(parents=True)
    (out / "bzImage").write_bytes(image)
    (out / "fingerprint").write_text(fingerprint + "\n")
    return out / "bzImage"


def test_build_stale_kernel_is_refused(monkeypatch, tmp_path: Path) -> None:
    """A bzImage whose recorded inputs are not today's series and fragments is
    never booted: the harness names it stale and says how to rebuild it."""
    current = inputs_fingerprint(VARIANT)
    real = variant_kernel(VARIANT).read_bytes()
    image = _fake_build(tmp_path / "stale", VARIANT, real, "0" * len(current))
    monkeypatch.setattr(paths, "BUILD_DIR", tmp_path / "stale")
    with pytest.raises(BadKernel, match=rf"kernel image '{image}' is stale: .*run "
                                        rf"'kernel/build.sh {VARIANT}'"):
        variant_kernel(VARIANT)
    image = _fake_build(tmp_path / "fresh", VARIANT, real, current)
    monkeypatch.setattr(paths, "BUILD_DIR", tmp_path / "fresh")
    assert variant_kernel(VARIANT) == image.resolve()


def test_build_flavour_is_part_of_the_inputs() -> None:
    """VARIANT+debug is its own build (its fragment is in the fingerprint); an
    unknown flavour is a one-line error naming it."""
    assert inputs_fingerprint(f"{VARIANT}+debug") != inputs_fingerprint(VARIANT)
    with pytest.raises(BadKernel, match=r"unknown flavour 'nosuch' in 'stock\+nosuch' "
                                        r"\(known: debug"):
        inputs_fingerprint(f"{VARIANT}+nosuch")


def test_build_fingerprint_reads_a_fragments_options_not_its_comments() -> None:
    """A comment (a reason) in a config fragment rebuilds nothing; an option, set or
    'is not set', is an input."""
    prints = []
    with throwaway_variant({"series": "", "base": f"{BASE}\n"},
                           fragment=f"{BASE_OPTION}\n") as (name, _out):
        for fragment in (f"{BASE_OPTION}\n", f"# why: a reason\n\n{BASE_OPTION}\n",
                         f"{BASE_OPTION}\n# CONFIG_RANDOM_TRUST_CPU is not set\n"):
            (paths.KERNEL_DIR / "configs" / f"{name}.config").write_text(fragment)
            prints.append(inputs_fingerprint(name))
    assert prints[0] == prints[1] != prints[2], prints


@contextlib.contextmanager
def throwaway_variant(files: dict[str, str], fragment: str = "") -> Iterator[tuple[str, Path]]:
    """A variant that exists for one test: its kernel/patches/ files, an optional
    config fragment; yields its name and build folder, and removes all three."""
    name = f"throwaway-{secrets.token_hex(3)}"
    folder = paths.KERNEL_DIR / "patches" / name
    config = paths.KERNEL_DIR / "configs" / f"{name}.config"
    out = paths.BUILD_DIR / "kernel" / name
    folder.mkdir()
    try:
        for file_name, text in files.items():
            (folder / file_name).write_text(text)
        if fragment:
            config.write_text(fragment)
        yield name, out
    finally:
        shutil.rmtree(folder, ignore_errors=True)
        config.unlink(missing_ok=True)
        shutil.rmtree(out, ignore_errors=True)


def build_on_overlay(name: str, lower: str) -> str:
    """kernel/build.sh NAME, which must build on an overlay of LOWER's tree (a skip
    where this machine cannot mount one): its progress output."""
    built = subprocess.run([str(paths.KERNEL_DIR / "build.sh"), name], capture_output=True,
                           text=True, timeout=1200)
    assert built.returncode == 0, built.stderr
    if "cannot mount an overlay" in built.stderr:
        pytest.skip(f"no overlay mount on this machine: {built.stderr}")
    assert f"an overlay on the built tree of '{lower}'" in built.stderr, built.stderr
    return built.stderr


def test_build_test_variant_builds_on_its_parents_tree() -> None:
    """A variant with patches but no config fragment of its own is built on an
    overlay of its parent's built tree: only what its patch touches is compiled,
    the configuration is the parent's, and the kernel is its own."""
    parent_out = paths.BUILD_DIR / "kernel" / TEST_PARENT
    variant_kernel(TEST_PARENT)            # built from today's inputs, or BadKernel
    original = (parent_out / "linux" / PATCHED_FILE).read_text()
    assert MESSAGE in original, f"no {MESSAGE} in {parent_out / 'linux' / PATCHED_FILE}"
    patch = "".join(difflib.unified_diff(
        original.splitlines(keepends=True),
        original.replace(MESSAGE, CHANGED, 1).splitlines(keepends=True),
        f"a/{PATCHED_FILE}", f"b/{PATCHED_FILE}"))
    with throwaway_variant({"0001-throwaway.patch": patch, "series": "0001-throwaway.patch\n",
                            "parent": f"{TEST_PARENT}\n"}) as (name, out):
        progress = build_on_overlay(name, TEST_PARENT)
        log = (out / "build.log").read_text()
        stats = re.search(r"ccache hits \d+ / (\d+) compilations", progress)
        compiled = int(stats.group(1)) if stats else len(re.findall(r"^\s+CC\s", log, re.M))
        assert 0 < compiled <= INCREMENTAL_MAX_COMPILATIONS, (
            f"{compiled} compilations for a one-file change ({out / 'build.log'})")
        assert (out / "config").read_text() == (parent_out / "config").read_text()
        assert (out / "bzImage").read_bytes() != (parent_out / "bzImage").read_bytes()


def test_build_variant_with_base_builds_on_the_base_tree() -> None:
    """A variant that names a base (as crng and lrng name stock) is built on an
    overlay of the base's built tree with its own configuration: kbuild compiles
    only what its options touch, the base's tree is left as it was, and the
    variant's flattened tree holds its own objects."""
    base_out = paths.BUILD_DIR / "kernel" / BASE
    variant_kernel(BASE)                   # built from today's inputs, or BadKernel
    base_object = base_out / "linux" / PATCHED_FILE.replace(".c", ".o")
    base_stamp = (base_object.stat().st_mtime_ns,
                  (base_out / "linux" / ".bench-fingerprint").read_text())
    with throwaway_variant({"series": "", "base": f"{BASE}\n"},
                           fragment=f"{BASE_OPTION}\n") as (name, out):
        build_on_overlay(name, BASE)
        # Kconfig's compiler probes count as ccache compilations: count kbuild's CCs.
        compiled = len(re.findall(r"^\s+CC\s", (out / "build.log").read_text(), re.M))
        assert 0 < compiled <= INCREMENTAL_MAX_COMPILATIONS, (
            f"{compiled} compilations for one option's change ({out / 'build.log'})")
        assert BASE_OPTION in (out / "config").read_text().splitlines()
        assert BASE_OPTION not in (base_out / "config").read_text().splitlines()
        own_object = out / "linux" / PATCHED_FILE.replace(".c", ".o")
        assert own_object.stat().st_ino != base_object.stat().st_ino, \
            f"{own_object} is the base's file, not rebuilt"
        assert (base_object.stat().st_mtime_ns,
                (base_out / "linux" / ".bench-fingerprint").read_text()) == base_stamp, \
            f"building '{name}' changed the base's tree {base_out / 'linux'}"
