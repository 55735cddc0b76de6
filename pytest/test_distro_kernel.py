"""A distro kernel as it ships: Debian 12's cloud kernel (build/distro/, fetched by
`make distro-kernel`, never installed) builds virtio_pci, virtio-rng and hv_vmbus as
modules. The bench packs what each profile needs into an initramfs segment and the
guest's init loads it before the probe; a kernel whose config lacks what a boot
needs is a skip naming the option; a module that is missing or does not load is
an error naming it. `make cloud-test` runs the whole suite on that kernel.
"""
from __future__ import annotations

import gzip
import lzma
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest

from benchlib.core import kconfig, paths
from benchlib.core.errors import BadKernel, BootFailed
from benchlib.core.modules import (GUEST_LOAD_ORDER, GUEST_MODULE_DIR, MODULES_TASK, ModuleTree,
                                   segment)
from benchlib.checks.procfs import parse_interrupts
from benchlib.core.profiles import Needs, get_profile
from benchlib.core.userkernel import user_kernel
from benchlib.checks.vmbus import HYP_ROW, TSC_PAGE_CLOCKSOURCE, current_clocksource

# A profile of each kind the distro kernel's modules must serve: virtio-rng, the
# Azure-like Hyper-V guest (direct-mode timers, the TSC page), PS/2 input.
VIRTIO_PROFILE = Needs(virtio_rng=True, hyperv=False, numa_nodes=1).one()
HYPERV_PROFILE = Needs(hyperv=True, stimer_mode="direct", reference_tsc=True).one()
INPUT_PROFILE = Needs(input_devices=True).one()
ELF = b"\x7fELF"


def loaded(record) -> list[str]:
    return [line.split()[1] for line in record.finished_task(MODULES_TASK).lines
            if line.startswith("loaded ")]


def test_distro_kernel_gets_virtio_rng_from_its_modules(boot_guest, cloud_kernel) -> None:
    record = boot_guest(VIRTIO_PROFILE, tasks=["hwrng"], under_test=cloud_kernel)
    current = record.finished_task("hwrng").lines[0].strip()
    assert current.startswith("virtio_rng"), (
        f"current hwrng is '{current}' on {cloud_kernel.version}: modules loaded "
        f"{loaded(record)} ({record.data_log})")
    assert [m.split("-", 1)[1] for m in loaded(record)][-2:] == ["virtio_pci.ko", "virtio_rng.ko"]


@pytest.mark.vmbus
def test_distro_kernel_brings_up_vmbus_from_its_module(boot_guest, cloud_kernel) -> None:
    """hv_vmbus as a module: VMBus connects, its interrupts have their HYP row, and the
    direct-mode timers and the TSC page it sets up are in use."""
    record = boot_guest(HYPERV_PROFILE, tasks=["interrupts"], under_test=cloud_kernel)
    assert any(m.endswith("-hv_vmbus.ko") for m in loaded(record)), loaded(record)
    assert any("Vmbus version" in text for _, text in record.messages), \
        f"no 'Vmbus version' in the kernel log: VMBus never connected ({record.data_log})"
    rows = parse_interrupts(record.finished_task("interrupts").lines)
    assert HYP_ROW in rows, f"no {HYP_ROW} row in /proc/interrupts: {sorted(rows)}"
    assert current_clocksource(record.messages) == TSC_PAGE_CLOCKSOURCE, record.data_log


def test_distro_kernel_without_option_is_a_skip_naming_it(boot_guest, cloud_kernel) -> None:
    """Debian's cloud kernel has no PS/2 mouse driver (CONFIG_MOUSE_PS2 unset): the
    input-device task is skipped naming the option; a boot without it still runs."""
    assert cloud_kernel.config.get("CONFIG_MOUSE_PS2") is None
    with pytest.raises(pytest.skip.Exception, match="lacks CONFIG_MOUSE_PS2 .*tcg-input"):
        boot_guest(INPUT_PROFILE, tasks=["inputs"], under_test=cloud_kernel)
    no_kprobes = replace(cloud_kernel, config={k: v for k, v in cloud_kernel.config.items()
                                               if k != "CONFIG_KPROBE_EVENTS"})
    with pytest.raises(pytest.skip.Exception, match="lacks CONFIG_KPROBE_EVENTS"):
        boot_guest(VIRTIO_PROFILE, tasks=["probe"], trace="stock", under_test=no_kprobes)
    # A task's own options (benchlib/core/tasks.py): the vCPU hot-add needs ACPI's.
    no_hotadd = replace(cloud_kernel, config={k: v for k, v in cloud_kernel.config.items()
                                              if k != "CONFIG_ACPI_HOTPLUG_CPU"})
    with pytest.raises(pytest.skip.Exception, match="lacks CONFIG_ACPI_HOTPLUG_CPU"):
        boot_guest(HYPERV_PROFILE, tasks=["hotadd"], under_test=no_hotadd)


def test_distro_kernel_module_that_fails_to_load_is_named(boot_guest, cloud_kernel,
                                                          tmp_path: Path) -> None:
    tree = fake_tree(tmp_path, {"kernel/virtio_pci.ko": ELF + b"not a module",
                                "kernel/virtio-rng.ko": ELF + b"not a module either"},
                     {"kernel/virtio-rng.ko": ["kernel/virtio_pci.ko"]},
                     release=cloud_kernel.modules.release)
    broken = replace(cloud_kernel, modules=tree)
    with pytest.raises(BootFailed, match="did not all load: failed 00-virtio_pci.ko"):
        boot_guest(VIRTIO_PROFILE, tasks=["hwrng"], under_test=broken)


def fake_tree(root: Path, files: dict[str, bytes], deps: dict[str, list[str]],
              builtin: tuple[str, ...] = (), release: str = "6.1.0-test") -> ModuleTree:
    """A module tree with these files (path -> bytes) and modules.dep entries."""
    for name, data in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(data)
    (root / "modules.dep").write_text("".join(
        f"{name}: {' '.join(deps.get(name, []))}\n" for name in files))
    (root / "modules.builtin").write_text("".join(f"{b}\n" for b in builtin))
    return ModuleTree(root, release)


def test_modules_come_decompressed_after_their_dependencies(tmp_path: Path) -> None:
    """virtio_rng needs virtio_pci (xz) which needs virtio (gzip) and a built-in:
    the segment holds them plain, in load order, with the order file the init reads."""
    tree = fake_tree(tmp_path / "tree", {
        "kernel/virtio_pci.ko.xz": lzma.compress(ELF + b"pci"),
        "kernel/virtio.ko.gz": gzip.compress(ELF + b"core"),
        "kernel/hw_random/virtio-rng.ko": ELF + b"rng",
    }, {"kernel/hw_random/virtio-rng.ko": ["kernel/virtio_pci.ko.xz", "kernel/virtio.ko.gz"],
        "kernel/virtio_pci.ko.xz": ["kernel/virtio.ko.gz", "kernel/builtin_thing.ko"]},
        builtin=("kernel/builtin_thing.ko",))
    packed = segment(tree, get_profile(VIRTIO_PROFILE).caps, VIRTIO_PROFILE)
    out = tmp_path / "unpacked"
    out.mkdir()
    subprocess.run(["cpio", "-idm", "--quiet"], input=packed, cwd=out, check=True)
    order = (out / GUEST_LOAD_ORDER).read_text().split()
    assert order == ["00-virtio.ko", "01-virtio_pci.ko", "02-virtio_rng.ko"], order
    assert [(out / GUEST_MODULE_DIR / m).read_bytes() for m in order] == \
        [ELF + b"core", ELF + b"pci", ELF + b"rng"]


def test_missing_module_is_named(tmp_path: Path) -> None:
    tree = fake_tree(tmp_path, {"kernel/virtio_pci.ko": ELF}, {})
    with pytest.raises(BadKernel, match="module 'virtio_rng' \\(needed by profile "
                                        f"'{VIRTIO_PROFILE}'\\) is neither built into"):
        segment(tree, get_profile(VIRTIO_PROFILE).caps, VIRTIO_PROFILE)


def test_embedded_config_is_read(tmp_path: Path) -> None:
    """CONFIG_IKCONFIG: the config between IKCFG_ST and IKCFG_ED, inside the image's
    compressed payload."""
    vmlinux = b"\0" * 64 + kconfig.IKCONFIG_START + gzip.compress(
        b"CONFIG_HYPERV=m\n# CONFIG_MOUSE_PS2 is not set\n") + kconfig.IKCONFIG_END
    image = tmp_path / "bzImage"
    image.write_bytes(b"\0" * 4096 + gzip.compress(vmlinux))
    assert kconfig.embedded(image) == {"CONFIG_HYPERV": "m"}


def test_modules_option_without_a_tree_is_named(tmp_path: Path) -> None:
    with pytest.raises(BadKernel, match=f"--modules '{tmp_path}' holds no modules.dep"):
        user_kernel(paths.kernel_image("stock"), tmp_path, None, tmp_path)
