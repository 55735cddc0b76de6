"""A modular kernel's modules, packed for the guest as an extra initramfs segment.

Distro kernels build the drivers a profile's devices need as modules (Debian 12's
cloud kernel: virtio_pci, virtio-rng, hv_vmbus, psmouse). For such a kernel the
bench finds its module tree (/lib/modules/RELEASE, a --modules DIR, or a
--kernel-deb package unpacked without installing it), picks what the profile
needs with every dependency from modules.dep, decompresses each (.ko, .ko.xz,
.ko.gz, .ko.zst: whatever the distro used) and writes them, in load order, into an
uncompressed cpio segment put before the bench's initramfs. The init loads them
(etc/bench/modules) before the probe. A module that is needed, not built in and
not in the tree is an error naming it.
"""
from __future__ import annotations

import gzip
import lzma
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Optional

from .errors import BadKernel
from .kernels import check_bzimage, kernel_version
from .profiles import Capabilities

MODULES_ROOT = Path("/lib/modules")
# Where the segment puts the modules and their load order (fixtures/init reads them).
GUEST_MODULE_DIR = "lib/modules/bench"
GUEST_LOAD_ORDER = "etc/bench/modules"
MODULES_TASK = "modules"        # the init's report of what it loaded
COMPRESSIONS = (".ko", ".ko.xz", ".ko.gz", ".ko.zst")


@dataclass(frozen=True)
class DeviceDriver:
    """What a profile's device needs of a kernel: an option, built in (=y) or a module
    in the tree (=m). needed_by: the tasks that fail without it (None: every boot
    in the profile); for other boots the module is loaded where the kernel has it,
    as a distro's initramfs would."""
    capability: str          # a Capabilities field
    option: str
    module: str
    needed_by: Optional[tuple[str, ...]] = None


DRIVERS = (
    DeviceDriver("virtio_rng", "CONFIG_VIRTIO_PCI", "virtio_pci"),
    DeviceDriver("virtio_rng", "CONFIG_HW_RANDOM_VIRTIO", "virtio_rng"),
    DeviceDriver("hyperv", "CONFIG_HYPERV", "hv_vmbus"),
    # The PS/2 keyboard driver is built in wherever serio is; the mouse only
    # matters to the task that counts input devices.
    DeviceDriver("input_devices", "CONFIG_MOUSE_PS2", "psmouse", needed_by=("inputs",)),
    # No boot fails without the generation ID's driver: a kernel that lacks it is
    # what the clone test judges ("no driver"), never a skip.
    DeviceDriver("vm_generation_id", "CONFIG_VMGENID", "vmgenid", needed_by=()),
    # /dev/cpu/N/msr, through which the vCPU hot-add task reads the partition-wide
    # Hyper-V MSRs on every CPU (test_vmbus_hotadd.py).
    DeviceDriver("hyperv", "CONFIG_X86_MSR", "msr", needed_by=("hotadd",)),
)
# cpio "newc": a 110-byte ASCII header, name and data each padded to 4 bytes.
CPIO_MAGIC, CPIO_ALIGN = "070701", 4
CPIO_FILE, CPIO_DIR = 0o100644, 0o040755


def drivers(capabilities: Capabilities) -> list[DeviceDriver]:
    return [d for d in DRIVERS if getattr(capabilities, d.capability)]


def required_options(capabilities: Capabilities, tasks: Iterable[str]) -> list[str]:
    """The options without which a boot in this profile, running these tasks, fails."""
    return [d.option for d in drivers(capabilities)
            if d.needed_by is None or set(d.needed_by) & set(tasks)]


def canonical(name: str) -> str:
    """A module's name as the kernel knows it: 'virtio-rng.ko.xz' -> 'virtio_rng'."""
    base = Path(name).name
    for suffix in sorted(COMPRESSIONS, key=len, reverse=True):
        if base.endswith(suffix):
            base = base[:-len(suffix)]
            break
    return base.replace("-", "_")


@dataclass(frozen=True)
class ModuleTree:
    """One kernel release's modules: a folder holding modules.dep."""
    path: Path
    release: str

    def dependencies(self) -> dict[str, tuple[str, list[str]]]:
        """name -> (path in the tree, the names it depends on), from modules.dep."""
        deps: dict[str, tuple[str, list[str]]] = {}
        for line in (self.path / "modules.dep").read_text().splitlines():
            module, _, needs = line.partition(":")
            if module:
                deps[canonical(module)] = (module, [canonical(n) for n in needs.split()])
        return deps

    def builtin(self) -> set[str]:
        path = self.path / "modules.builtin"
        return {canonical(line) for line in path.read_text().split()} if path.is_file() \
            else set()

    def load_order(self, names: Iterable[str], why: str,
                   optional: Iterable[str] = ()) -> list[str]:
        """Paths (in the tree) of names and their dependencies, each after what it
        needs; built-in names need nothing, optional ones absent from the tree are
        left out. BadKernel names any other missing module."""
        deps, builtin, optional = self.dependencies(), self.builtin(), set(optional)
        order: list[str] = []

        def visit(name: str, chain: tuple[str, ...]) -> None:
            if name in builtin or (name in optional and name not in deps):
                return
            if name not in deps:
                raise BadKernel(f"module '{name}' ({why}) is neither built into kernel "
                                f"{self.release} nor in {self.path}/modules.dep")
            path, needs = deps[name]
            if path in order or name in chain:
                return
            for dep in needs:
                visit(dep, chain + (name,))
            order.append(path)

        for name in names:
            visit(name, ())
        return order

    def read(self, relpath: str) -> bytes:
        """A module's ELF bytes, decompressed as the distro compressed it."""
        path = self.path / relpath
        if not path.is_file():
            raise BadKernel(f"module file {path}, listed in modules.dep, does not exist")
        data = path.read_bytes()
        if relpath.endswith(".xz"):
            return lzma.decompress(data)
        if relpath.endswith(".gz"):
            return gzip.decompress(data)
        if relpath.endswith(".zst"):
            if not shutil.which("zstd"):
                raise BadKernel(f"module {path} is zstd-compressed: install zstd")
            return subprocess.run(["zstd", "-dc", str(path)], check=True,
                                  capture_output=True).stdout
        return data


def find_tree(image: Path, modules_dir: Optional[Path] = None) -> Optional[ModuleTree]:
    """The module tree of a kernel image: --modules DIR (the release folder itself, or
    a folder holding it), else /lib/modules/RELEASE; None if the kernel has none.
    A DIR given that holds no modules.dep for the image's release is an error."""
    release = kernel_version(image).split(" ", 1)[0]
    if modules_dir is not None:
        for path in (modules_dir, modules_dir / release, modules_dir / "lib/modules" / release):
            if (path / "modules.dep").is_file():
                return ModuleTree(path, release)
        raise BadKernel(f"--modules '{modules_dir}' holds no modules.dep for kernel release "
                        f"'{release or '?'}' (of {image})")
    path = MODULES_ROOT / release
    return ModuleTree(path, release) if release and (path / "modules.dep").is_file() else None


@dataclass(frozen=True)
class UnpackedDeb:
    image: Path
    tree: Optional[ModuleTree]
    boot_dir: Path


def unpack_deb(deb: Path, dest: Path) -> UnpackedDeb:
    """A linux-image .deb unpacked under dest (never installed): its vmlinuz, and its
    modules with modules.dep made by depmod (the package's postinst would)."""
    if not deb.is_file():
        raise BadKernel(f"kernel package '{deb}' does not exist")
    shutil.rmtree(dest, ignore_errors=True)
    dest.mkdir(parents=True)
    unpacked = subprocess.run(["dpkg-deb", "-x", str(deb), str(dest)],
                              capture_output=True, text=True)
    if unpacked.returncode != 0:
        raise BadKernel(f"kernel package '{deb}' could not be unpacked: "
                        f"{unpacked.stderr.strip()}")
    images = sorted((dest / "boot").glob("vmlinuz-*"))
    if len(images) != 1:
        raise BadKernel(f"kernel package '{deb}' holds {len(images)} boot/vmlinuz-* images, "
                        "not one")
    image = check_bzimage(images[0])
    release = images[0].name[len("vmlinuz-"):]
    tree_path = dest / "lib/modules" / release
    if not tree_path.is_dir():
        return UnpackedDeb(image, None, dest / "boot")
    if not (tree_path / "modules.dep").is_file():
        depmod = subprocess.run(["depmod", "-b", str(dest), release],
                                capture_output=True, text=True)
        if depmod.returncode != 0:
            raise BadKernel(f"depmod for '{deb}' failed: {depmod.stderr.strip()}")
    return UnpackedDeb(image, ModuleTree(tree_path, release), dest / "boot")


def cpio_entry(name: str, mode: int, data: bytes = b"") -> bytes:
    """One newc entry (file, folder or symlink by mode; a link's data is its target)."""
    fields = [0, mode, 0, 0, 1, 0, len(data), 0, 0, 0, 0, len(name) + 1, 0]
    header = CPIO_MAGIC + "".join(f"{f:08x}" for f in fields)
    out = header.encode() + name.encode() + b"\0"
    out += b"\0" * (-len(out) % CPIO_ALIGN)
    return out + data + b"\0" * (-len(data) % CPIO_ALIGN)


def segment(tree: ModuleTree, capabilities: Capabilities, profile: str,
            config: Optional[dict[str, str]] = None) -> Optional[bytes]:
    """The cpio segment with the modules of a profile's devices, or None if there are
    none to load. With the kernel's config, only drivers it builds as modules (=m)."""
    wanted = [d for d in drivers(capabilities) if config is None or config.get(d.option) == "m"]
    order = tree.load_order([d.module for d in wanted], f"needed by profile '{profile}'",
                            optional=[d.module for d in wanted if d.needed_by is not None])
    if not order:
        return None
    out = b"".join(cpio_entry(d, CPIO_DIR) for d in
                   ("lib", "lib/modules", GUEST_MODULE_DIR, "etc", "etc/bench"))
    listing = []
    for index, relpath in enumerate(order):
        guest_name = f"{index:02d}-{canonical(relpath)}.ko"
        listing.append(guest_name)
        out += cpio_entry(f"{GUEST_MODULE_DIR}/{guest_name}", CPIO_FILE, tree.read(relpath))
    out += cpio_entry(GUEST_LOAD_ORDER, CPIO_FILE, ("\n".join(listing) + "\n").encode())
    return out + cpio_entry("TRAILER!!!", 0)


def initrd_with_modules(base: Path, tree: ModuleTree, capabilities: Capabilities,
                        profile: str, dest: Path,
                        config: Optional[dict[str, str]] = None) -> Path:
    """base, or dest = the modules' segment followed by base (the kernel unpacks
    each archive of a concatenation in turn, as it does for early microcode)."""
    packed = segment(tree, capabilities, profile, config)
    if packed is None:
        return base
    dest.write_bytes(packed + base.read_bytes())
    return dest
