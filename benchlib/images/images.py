"""Images: a real Debian userspace, built from a recipe, packed as the guest's initramfs.

A recipe (vm-definitions/images/NAME.toml, or any .toml a user names) says what
the image is: a Debian suite and package list that mmdebstrap turns into a root,
or a root tarball the user brings; which entropy daemons run; which first-boot
units it adds. Building a root takes minutes, so it is done once and cached under
build/images/roots/KEY, where KEY hashes everything the root is made of (suite,
mirror, packages, the way it is made; for a tarball, its bytes). A root is built
in a folder of its own and renamed into place only when whole: a half-built root
is never cached. Its package manifest (dpkg-query) is kept beside it.

Per image, the root's cpio is followed by an overlay segment (the kernel unpacks
each archive of a concatenation in turn, later files replacing earlier ones):
/init, the bench's collector and controls (fixtures/image/), the recipe's
first-boot units, masks for the daemons that stay off, and, for a second boot, the
seed file a first boot saved. A modular kernel's whole module tree is one more
segment, so that udev and systemd load drivers as on a real system.
"""
from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
import time
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional

from ..core.errors import BenchError
from ..core.kconfig import Config
from ..core.modules import CPIO_DIR, ModuleTree, cpio_entry
from ..core.paths import BUILD_DIR, FIXTURE_DIR, PROFILE_DIR

IMAGE_DIR = PROFILE_DIR / "images"
UNIT_DIR = IMAGE_DIR / "units"
IMAGE_FIXTURES = FIXTURE_DIR / "image"
ROOT_CACHE = BUILD_DIR / "images" / "roots"
INITRD_CACHE = BUILD_DIR / "images" / "initrd"
# Bumped whenever the way a root is made changes (options, hooks): old roots then
# no longer match any key.
ROOT_RECIPE_VERSION = 1
DEFAULT_MIRROR = "http://deb.debian.org/debian"
# Debian's documentation and translations: a third of the root, never read at boot.
DPKG_EXCLUDES = ("/usr/share/man/*", "/usr/share/doc/*", "/usr/share/locale/*")
# What makes a root an image's *first* boot (the way cloud images ship): no SSH
# host keys, no machine ID (systemd's ConditionFirstBoot), no saved random seed.
FIRST_BOOT_HOOKS = (
    'rm -f "$1"/etc/ssh/ssh_host_*',
    'rm -f "$1"/var/lib/systemd/random-seed',
    ': > "$1"/etc/machine-id',
)
# The entropy daemons a recipe may turn on, and their units in Debian 12. Every
# root has them all installed; the ones a recipe does not name are masked.
DAEMON_UNITS = {
    "haveged": "haveged.service",
    "jitterentropy": "jitterentropy.service",
    "rngd": "rng-tools-debian.service",
}
# Units masked in every image: a serial getty would write a login prompt on the
# console the host follows (and read from it); systemd-firstboot would prompt on
# /dev/console for a locale and a root password that cloud images preseed.
ALWAYS_MASKED = ("serial-getty@.service", "systemd-firstboot.service")
# The bench's own units (fixtures/image/), each with the target that wants it: the
# collector in every image boot, with its deadline (a boot that never reaches
# multi-user.target still reports); the controls only in the boots that check the
# observer (pytest -k image), because the blocking control's wait starts the
# kernel's jitter entropy and so changes when the RNG gets ready for everyone.
COLLECTOR_UNITS = {"bench-collect.service": "multi-user.target",
                   "bench-deadline.service": "sysinit.target"}
CONTROL_UNITS = {
    "bench-control-block.service": "sysinit.target",
    "bench-control-nonblock.service": "sysinit.target",
}
BENCH_UNITS = {**COLLECTOR_UNITS, **CONTROL_UNITS}
# The static programs the collector and controls run (built by fixtures/Makefile).
BENCH_PROGRAMS = ("grcontrol", "kmsgdump")
GUEST_BENCH_DIR = "usr/lib/bench"
GUEST_SEED = "var/lib/systemd/random-seed"
# The units whose time stamps the collector reports, besides the recipe's own.
TIMELINE_UNITS = ("systemd-random-seed.service", "ssh.service", "sysinit.target",
                  "basic.target", "multi-user.target", *BENCH_UNITS)
# The guest's memory for an image boot unless the recipe says otherwise: the
# initramfs (about 200 MB) is held twice while it unpacks.
DEFAULT_MEMORY_MIB = 2048
# An image's initramfs files not used for this long are removed when a new one is
# written (a run uses several at once: with and without controls, seeds, modules).
STALE_INITRD_S = 24 * 3600
CPIO_EXEC, CPIO_LINK = 0o100755, 0o120777
CPIO_SECRET = 0o100600


class BadImage(BenchError):
    """An image that cannot be built or booted: says which and why."""


@dataclass(frozen=True)
class Recipe:
    name: str
    path: Path
    description: str
    suite: str = "bookworm"
    mirror: str = DEFAULT_MIRROR
    packages: tuple[str, ...] = ()
    root_tar: Optional[Path] = None      # a user's own root instead of suite + packages
    daemons: tuple[str, ...] = ()
    first_boot: tuple[str, ...] = ()     # unit files in vm-definitions/images/units
    memory_mib: int = DEFAULT_MEMORY_MIB

    def daemon_units(self) -> list[str]:
        return [DAEMON_UNITS[d] for d in self.daemons]

    def timeline_units(self) -> list[str]:
        """Every unit whose time stamps the collector reports, in boot order."""
        return [*self.first_boot, *DAEMON_UNITS.values(), *TIMELINE_UNITS]


# --- Recipes ---------------------------------------------------------------------

def names() -> list[str]:
    return sorted(p.stem for p in IMAGE_DIR.glob("*.toml"))


def recipe_path(name: str) -> Path:
    """A recipe by name (vm-definitions/images/NAME.toml) or by path (a .toml file)."""
    if name.endswith(".toml"):
        path = Path(name)
        if not path.is_file():
            raise BadImage(f"image recipe '{name}' does not exist")
        return path
    path = IMAGE_DIR / f"{name}.toml"
    if not path.is_file():
        raise BadImage(f"unknown image '{name}' (known: {', '.join(names())}; "
                       "or give a recipe's path, NAME.toml)")
    return path


def _raw(path: Path, seen: tuple[Path, ...] = ()) -> dict[str, object]:
    try:
        data = tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as exc:
        raise BadImage(f"image recipe {path}: {exc}") from None
    base = data.pop("extends", None)
    if base is None:
        return data
    base_path = recipe_path(str(base))
    if base_path.resolve() in seen:
        raise BadImage(f"image recipe {path}: 'extends' loops back to {base_path}")
    merged = _raw(base_path, (*seen, path.resolve()))
    merged.pop("description", None)
    merged.update(data)
    return merged


KNOWN_KEYS = {"description", "suite", "mirror", "packages", "root_tar", "daemons",
              "first_boot", "memory_mib"}


def load(name: str) -> Recipe:
    """A recipe, its 'extends' chain merged; BadImage naming what is wrong."""
    path = recipe_path(name)
    data = _raw(path)
    where = f"image recipe {path}"
    unknown = sorted(set(data) - KNOWN_KEYS)
    if unknown:
        raise BadImage(f"{where}: unknown key(s) {', '.join(unknown)} "
                       f"(known: {', '.join(sorted(KNOWN_KEYS))})")
    daemons = tuple(str(d) for d in list(data.get("daemons", [])))  # type: ignore[call-overload]
    bad = [d for d in daemons if d not in DAEMON_UNITS]
    if bad:
        raise BadImage(f"{where}: unknown entropy daemon(s) {', '.join(bad)} "
                       f"(known: {', '.join(DAEMON_UNITS)})")
    first_boot = tuple(str(u) for u in list(data.get("first_boot", [])))  # type: ignore
    for unit in first_boot:
        if not (UNIT_DIR / unit).is_file():
            raise BadImage(f"{where}: first-boot unit '{unit}' is not in {UNIT_DIR}")
    packages = tuple(str(p) for p in list(data.get("packages", [])))  # type: ignore
    root_tar = data.get("root_tar")
    if root_tar is not None:
        root_tar = (path.parent / str(root_tar)).resolve()
        if not root_tar.is_file():
            raise BadImage(f"{where}: root_tar '{root_tar}' does not exist")
        if packages:
            raise BadImage(f"{where}: give packages or root_tar, not both")
    elif not packages:
        raise BadImage(f"{where}: no packages (or root_tar) to make a root of")
    name = path.stem
    return Recipe(name=name, path=path, description=str(data.get("description", "")),
                  suite=str(data.get("suite", "bookworm")),
                  mirror=str(data.get("mirror", DEFAULT_MIRROR)), packages=packages,
                  root_tar=root_tar, daemons=daemons, first_boot=first_boot,
                  memory_mib=int(data.get("memory_mib", DEFAULT_MEMORY_MIB)))  # type: ignore


# --- Roots -----------------------------------------------------------------------

def recipe_key(recipe: Recipe) -> str:
    """What the recipe says its root is made of, hashed: recipes that differ only in
    daemons or first-boot units share it. For a tarball, its bytes."""
    digest = hashlib.sha256()
    if recipe.root_tar is not None:
        with recipe.root_tar.open("rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
    else:
        digest.update(json.dumps([ROOT_RECIPE_VERSION, recipe.suite, recipe.mirror,
                                  sorted(recipe.packages), DPKG_EXCLUDES,
                                  FIRST_BOOT_HOOKS]).encode())
    return digest.hexdigest()[:16]


def root_key(recipe: Recipe, versions: Optional[dict[str, str]] = None) -> str:
    """The cache key of a root: the recipe's inputs and, for a package list, the
    versions the registry resolves them to today (a new point release is a new root)."""
    if versions is None:
        return recipe_key(recipe)
    listing = "".join(f"{name} {version}\n" for name, version in sorted(versions.items()))
    return hashlib.sha256((recipe_key(recipe) + listing).encode()).hexdigest()[:16]


@dataclass(frozen=True)
class Root:
    """A cached root: its cpio, its manifest, whether /lib is /usr/lib's link."""
    path: Path
    key: str

    @property
    def cpio(self) -> Path:
        return self.path / "root.cpio"

    @property
    def manifest(self) -> Path:
        return self.path / "manifest.txt"

    def meta(self) -> dict[str, object]:
        return json.loads((self.path / "root.json").read_text())

    def packages(self) -> dict[str, str]:
        """package -> version, as installed in the root."""
        out = {}
        for line in self.manifest.read_text().splitlines():
            name, _, version = line.partition("\t")
            out[name] = version
        return out


def _latest_file(recipe: Recipe) -> Path:
    """Names the root last built for a recipe's inputs (whatever the versions were)."""
    return ROOT_CACHE / f"{recipe_key(recipe)}.latest"


def cached_root(recipe: Recipe) -> Optional[Root]:
    """The root last built for this recipe, without asking the registry."""
    latest = _latest_file(recipe)
    if not latest.is_file():
        return None
    key = latest.read_text().strip()
    path = ROOT_CACHE / key
    return Root(path, key) if (path / "root.json").is_file() else None


Progress = Callable[[str], None]
# apt's simulated install, one line per package it would unpack.
_SIMULATED = re.compile(r"^Inst (\S+) \((\S+) ", re.M)


def resolve(recipe: Recipe, log: Path) -> dict[str, str]:
    """The packages and versions the registry resolves the recipe to today
    (mmdebstrap --simulate: the indices only, about 10 s); BadImage naming a package
    that does not exist or a registry that cannot be reached."""
    scratch = ROOT_CACHE / f"resolve-{os.getpid()}"
    try:
        _mmdebstrap(recipe, scratch, log, simulate=True)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    versions = dict(_SIMULATED.findall(log.read_text(errors="replace")))
    if not versions:
        raise BadImage(f"image '{recipe.name}': mmdebstrap --simulate resolved no package "
                       f"(log: {log})")
    return versions


def build_root(recipe: Recipe, progress: Progress = print) -> Root:
    """The recipe's root: from the cache if one was built from the same inputs and
    versions, else built now (a few minutes). With the registry out of reach, the
    last root built for the recipe, saying so. One build of a recipe's root at a
    time on this machine (a lock file): a second caller waits and takes it."""
    ROOT_CACHE.mkdir(parents=True, exist_ok=True)
    with (ROOT_CACHE / f"{recipe_key(recipe)}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        return _build_root(recipe, progress)


def _build_root(recipe: Recipe, progress: Progress) -> Root:
    versions = None
    if recipe.root_tar is None:
        resolve_log = ROOT_CACHE / f"{recipe_key(recipe)}.resolve.log"
        resolve_log.unlink(missing_ok=True)
        try:
            versions = resolve(recipe, resolve_log)
        except BadImage as exc:
            last = cached_root(recipe)
            if last is None or "cannot be reached" not in str(exc):
                raise
            progress(f"==> [image {recipe.name}] {exc}: using the root built before "
                     f"({last.path})")
            return last
    key = root_key(recipe, versions)
    final = ROOT_CACHE / key
    if (final / "root.json").is_file():
        _latest_file(recipe).write_text(key + "\n")
        return Root(final, key)
    partial = ROOT_CACHE / f"{key}.partial-{os.getpid()}"
    shutil.rmtree(partial, ignore_errors=True)
    (partial / "tree").mkdir(parents=True)
    log = partial / "build.log"
    try:
        if recipe.root_tar is not None:
            progress(f"==> [image {recipe.name}] unpacking {recipe.root_tar}")
            _run(["tar", "-xpf", str(recipe.root_tar), "--numeric-owner", "-C",
                  str(partial / "tree")], log, recipe)
        else:
            progress(f"==> [image {recipe.name}] building a {recipe.suite} root with "
                     f"mmdebstrap ({len(versions or {})} packages; a few minutes; "
                     f"log: {ROOT_CACHE / key}.log)")
            _mmdebstrap(recipe, partial / "tree", log)
        _manifest(partial / "tree", partial / "manifest.txt")
        merged = (partial / "tree" / "lib").is_symlink()
        _cpio(partial / "tree", partial / "root.cpio", log, recipe)
        shutil.rmtree(partial / "tree")
        (partial / "root.json").write_text(json.dumps(
            {"recipe": str(recipe.path), "key": key, "merged_usr": merged,
             "suite": recipe.suite, "mirror": recipe.mirror,
             "packages": list(recipe.packages),
             "root_tar": str(recipe.root_tar) if recipe.root_tar else None}, indent=2))
        shutil.copy(log, ROOT_CACHE / f"{key}.log")
        partial.rename(final)
    except BaseException:
        if log.is_file():
            shutil.copy(log, ROOT_CACHE / f"{key}.log")
        shutil.rmtree(partial, ignore_errors=True)
        raise
    _latest_file(recipe).write_text(key + "\n")
    size = (final / "root.cpio").stat().st_size >> 20
    progress(f"==> [image {recipe.name}] root {key}: {size} MiB ({final})")
    return Root(final, key)


def _mmdebstrap(recipe: Recipe, tree: Path, log: Path, simulate: bool = False) -> None:
    if shutil.which("mmdebstrap") is None:
        raise BadImage("mmdebstrap is not installed: run 'make setup' "
                       "(apt-get install mmdebstrap)")
    command = ["mmdebstrap", *(["--simulate", "--verbose"] if simulate else []),
               "--variant=apt", "--mode=root", "--format=directory",
               "--include=" + ",".join(recipe.packages),
               *(f"--dpkgopt=path-exclude={p}" for p in DPKG_EXCLUDES),
               *(f"--customize-hook={h}" for h in FIRST_BOOT_HOOKS),
               recipe.suite, str(tree), recipe.mirror]
    _run(command, log, recipe)


# mmdebstrap's (apt's) words for the failures a user can fix, and what to say.
_UNKNOWN_PACKAGE = re.compile(r"E: Unable to locate package (\S+)|"
                              r"E: Package '([^']+)' has no installation candidate")
_UNREACHABLE = re.compile(r"Could not resolve|Temporary failure resolving|Failed to fetch|"
                          r"Could not connect|Connection refused|Unable to connect|"
                          r"Network is unreachable|Connection failed")


def _run(command: list[str], log: Path, recipe: Recipe) -> None:
    with log.open("a") as out:
        out.write(f"$ {' '.join(command)}\n")
        out.flush()
        done = subprocess.run(command, stdout=out, stderr=subprocess.STDOUT)
    if done.returncode == 0:
        return
    text = log.read_text(errors="replace")
    where = f"image '{recipe.name}'"
    unknown = _UNKNOWN_PACKAGE.search(text)
    if unknown:
        raise BadImage(f"{where}: package '{unknown.group(1) or unknown.group(2)}' does not "
                       f"exist in {recipe.suite} at {recipe.mirror} (recipe: {recipe.path})")
    kept = ROOT_CACHE / (log.name if log.parent == ROOT_CACHE else
                         f"{log.parent.name.split('.')[0]}.log")
    if _UNREACHABLE.search(text):
        raise BadImage(f"{where}: the package registry {recipe.mirror} cannot be reached "
                       f"(log: {kept})")
    errors = [line for line in text.splitlines() if line.startswith(("E:", "tar:", "cpio:"))]
    reason = errors[-1] if errors else f"{command[0]} exited with {done.returncode}"
    raise BadImage(f"{where}: {reason} (log: {kept})")


def _manifest(tree: Path, dest: Path) -> None:
    admindir = tree / "var/lib/dpkg"
    if not (admindir / "status").is_file():
        dest.write_text("")        # a user's root without dpkg: no manifest to give
        return
    listing = subprocess.run(["dpkg-query", f"--admindir={admindir}", "-W",
                              "-f=${Package}\t${Version}\n"], check=True,
                             capture_output=True, text=True).stdout
    dest.write_text(listing)


def _cpio(tree: Path, dest: Path, log: Path, recipe: Recipe) -> None:
    """An uncompressed newc archive of the tree, in a stable order, owners kept."""
    names = subprocess.run(["find", "."], cwd=tree, check=True, capture_output=True).stdout
    ordered = b"\n".join(sorted(names.split(b"\n"))).strip(b"\n") + b"\n"
    with dest.open("wb") as out, log.open("a") as err:
        done = subprocess.run(["cpio", "--quiet", "-o", "-H", "newc"], cwd=tree,
                              input=ordered, stdout=out, stderr=err)
    if done.returncode != 0:
        raise BadImage(f"image '{recipe.name}': cpio of its root failed (log: {log})")


# --- Overlay and the boot's initramfs --------------------------------------------

def _dirs(paths: list[str]) -> list[str]:
    """Every parent folder of these paths, parents first."""
    out: list[str] = []
    for path in paths:
        parts = path.split("/")[:-1]
        for i in range(1, len(parts) + 1):
            folder = "/".join(parts[:i])
            if folder not in out:
                out.append(folder)
    return out


@dataclass
class Overlay:
    """The files an image adds to its root, as (guest path, mode, bytes)."""
    files: list[tuple[str, int, bytes]] = field(default_factory=list)

    def add(self, path: str, data: bytes, mode: int = 0o100644) -> None:
        self.files.append((path, mode, data))

    def link(self, path: str, target: str) -> None:
        self.files.append((path, CPIO_LINK, target.encode()))

    def enable(self, unit: str, target: str) -> None:
        self.link(f"etc/systemd/system/{target}.wants/{unit}", f"/etc/systemd/system/{unit}")

    def mask(self, unit: str) -> None:
        self.link(f"etc/systemd/system/{unit}", "/dev/null")

    def segment(self) -> bytes:
        folders = [d for d in _dirs([p for p, _, _ in self.files]) if d not in ("lib", "bin")]
        out = b"".join(cpio_entry(d, CPIO_DIR) for d in folders)
        out += b"".join(cpio_entry(p, mode, data) for p, mode, data in self.files)
        return out + cpio_entry("TRAILER!!!", 0)


def _wanted_by(unit_file: Path) -> str:
    match = re.search(r"^WantedBy=(\S+)", unit_file.read_text(), re.M)
    return match.group(1) if match else "multi-user.target"


def overlay(recipe: Recipe, seed: Optional[bytes] = None, controls: bool = False) -> Overlay:
    """What the image adds to its root for the bench (see the module's docstring)."""
    layer = Overlay()
    layer.link("init", "/lib/systemd/systemd")
    programs = BUILD_DIR / "fixtures"
    for program in BENCH_PROGRAMS:
        path = programs / program
        if not path.is_file():
            raise BadImage(f"the bench's guest program {path} is not built: run 'make fixtures'")
        layer.add(f"{GUEST_BENCH_DIR}/{program}", path.read_bytes(), CPIO_EXEC)
    layer.add(f"{GUEST_BENCH_DIR}/collect", (IMAGE_FIXTURES / "collect").read_bytes(), CPIO_EXEC)
    layer.add(f"{GUEST_BENCH_DIR}/uarts.sh", (FIXTURE_DIR / "uarts.sh").read_bytes())
    layer.add(f"{GUEST_BENCH_DIR}/units", ("\n".join(recipe.timeline_units()) + "\n").encode())
    for unit, target in {**COLLECTOR_UNITS, **(CONTROL_UNITS if controls else {})}.items():
        layer.add(f"etc/systemd/system/{unit}", (IMAGE_FIXTURES / unit).read_bytes())
        layer.enable(unit, target)
    for unit in recipe.first_boot:
        layer.add(f"etc/systemd/system/{unit}", (UNIT_DIR / unit).read_bytes())
        layer.enable(unit, _wanted_by(UNIT_DIR / unit))
    for daemon, unit in DAEMON_UNITS.items():
        if daemon not in recipe.daemons:
            layer.mask(unit)
    for unit in ALWAYS_MASKED:
        layer.mask(unit)
    if seed is not None:
        layer.add(GUEST_SEED, seed, CPIO_SECRET)
    return layer


def module_segment(tree: ModuleTree, merged_usr: bool) -> bytes:
    """A kernel's whole module tree at /lib/modules/RELEASE, files as the distro ships
    them (kmod reads its compressed modules itself)."""
    prefix = f"{'usr/' if merged_usr else ''}lib/modules/{tree.release}"
    files = sorted(p for p in tree.path.rglob("*") if p.is_file())
    paths = [f"{prefix}/{p.relative_to(tree.path)}" for p in files]
    folders = [d for d in _dirs(paths) if d not in ("lib", "usr", "usr/lib")]
    out = b"".join(cpio_entry(d, CPIO_DIR) for d in folders)
    out += b"".join(cpio_entry(path, 0o100644, f.read_bytes()) for path, f in zip(paths, files))
    return out + cpio_entry("TRAILER!!!", 0)


def initrd(recipe: Recipe, root: Root, modules: Optional[ModuleTree] = None,
           seed: Optional[bytes] = None, controls: bool = False) -> Path:
    """The boot's initramfs: root, overlay (and modules), cached by what is in them.
    Files of the same image older than a day are removed: each is the size of its
    root (the boots of one run share theirs)."""
    layer = overlay(recipe, seed, controls).segment()
    extra = module_segment(modules, bool(root.meta()["merged_usr"])) if modules else b""
    digest = hashlib.sha256(root.key.encode() + layer + extra).hexdigest()[:16]
    INITRD_CACHE.mkdir(parents=True, exist_ok=True)
    dest = INITRD_CACHE / f"{recipe.name}-{digest}.cpio"
    if dest.is_file():
        return dest
    for old in INITRD_CACHE.glob(f"{recipe.name}-*.cpio"):
        if time.time() - old.stat().st_mtime > STALE_INITRD_S:
            old.unlink(missing_ok=True)
    # Boots that start together may write the same file: each its own partial
    # file, renamed into place (the same bytes, whoever is last).
    with tempfile.NamedTemporaryFile(dir=INITRD_CACHE, prefix=f".{dest.name}.",
                                     delete=False) as out, root.cpio.open("rb") as base:
        shutil.copyfileobj(base, out, 1 << 20)
        out.write(layer)
        out.write(extra)
    os.replace(out.name, dest)
    return dest


# --- Kernels that boot systemd ----------------------------------------------------

# What systemd 252, udev and sshd cannot start without (systemd's README, and
# kernel/configs/userspace.config for the reasons): =y, or =m for a distro
# kernel whose module tree comes with the image.
SYSTEMD_NEEDS = ("CONFIG_CGROUPS", "CONFIG_NET", "CONFIG_UNIX", "CONFIG_INET",
                 "CONFIG_INOTIFY_USER", "CONFIG_FHANDLE", "CONFIG_SIGNALFD", "CONFIG_TIMERFD",
                 "CONFIG_EPOLL", "CONFIG_DEVTMPFS", "CONFIG_TMPFS", "CONFIG_AUTOFS_FS",
                 "CONFIG_FILE_LOCKING", "CONFIG_PROC_FS", "CONFIG_SYSFS")


def systemd_missing(config: Config, modular: bool) -> list[str]:
    """The options of SYSTEMD_NEEDS a kernel's config lacks."""
    ok = ("y", "m") if modular else ("y",)
    return [o for o in SYSTEMD_NEEDS if config.get(o) not in ok]


def main(argv: list[str]) -> int:
    """python3 -m benchlib.images.images [NAME ...]: build (or find cached) these images'
    roots; default: every recipe's."""
    for name in argv or names():
        build_root(load(name))
    return 0


if __name__ == "__main__":
    from ..core.cli import run_main
    run_main("bench images", main)
