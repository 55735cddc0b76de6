"""The kernel a user brings: an image, its modules, its config, its version string.

  --kernel IMAGE                 a bzImage anywhere on the disk; its modules from
                                 /lib/modules/RELEASE when they are there
  --kernel IMAGE --modules DIR   its modules from DIR (the release folder, or one
                                 holding lib/modules/RELEASE)
  --kernel-deb PKG.deb           a linux-image package, unpacked (never installed)
                                 under the run's folder: its vmlinuz and modules

The config (kconfig.find) decides which boots can run: a profile or task that
needs an option the kernel lacks is skipped, naming the option.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Optional

from . import kconfig
from .errors import BadKernel
from .kernels import check_bzimage, kernel_version
from .modules import ModuleTree, find_tree, unpack_deb
from .profiles import Capabilities
from .variants import CUSTOM


@dataclass(frozen=True)
class KernelUnderTest:
    label: str                         # the variant name boots and reports use
    image: Path
    version: str                       # the image's own version string
    modules: Optional[ModuleTree] = None
    config: Optional[kconfig.Config] = None
    config_source: str = ""            # where the config was read, or why none was

    def missing_options(self, capabilities: Capabilities, tasks: Iterable[str],
                        trace_options: Iterable[str] = ()) -> list[str]:
        """Options a boot needs that this kernel lacks ([] when its config is unknown:
        a kernel the bench built has everything its tests need); trace_options: its
        trace set's (guest.trace_options())."""
        if self.config is None:
            return []
        return kconfig.missing(self.config, kconfig.needed(capabilities, tasks, trace_options))

    def skip_reason(self, profile: str, missing: list[str]) -> str:
        return (f"kernel {self.version.split(' ', 1)[0] or self.image} lacks "
                f"{', '.join(missing)} (config: {self.config_source}), which this boot in "
                f"profile '{profile}' needs")

    def describe(self) -> str:
        modules = f"modules from {self.modules.path}" if self.modules else "no module tree"
        return f"{self.image}: {self.version or 'no version string'}; {modules}; " \
               f"config: {self.config_source}"


def bench_kernel(label: str, image: Path) -> KernelUnderTest:
    """One of the bench's own variants: built in, no modules, no option to check."""
    return KernelUnderTest(label, image, kernel_version(image), config_source="built by the bench")


def user_kernel(image: Optional[Path], modules_dir: Optional[Path], deb: Optional[Path],
                unpack_dir: Path) -> KernelUnderTest:
    """The kernel named by --kernel / --modules / --kernel-deb; BadKernel on bad input."""
    if deb is not None and image is not None:
        raise BadKernel(f"give --kernel or --kernel-deb, not both ('{image}', '{deb}')")
    if deb is not None:
        if modules_dir is not None:
            raise BadKernel(f"--modules '{modules_dir}' with --kernel-deb: the package "
                            "brings its own modules")
        unpacked = unpack_deb(deb, unpack_dir / deb.name.removesuffix(".deb"))
        config, source = kconfig.find(unpacked.image, [unpacked.boot_dir])
        return KernelUnderTest(CUSTOM, unpacked.image, kernel_version(unpacked.image),
                               unpacked.tree, config, source)
    if image is None:
        raise BadKernel(f"--modules '{modules_dir}' needs --kernel IMAGE")
    image = check_bzimage(image)
    config, source = kconfig.find(image)
    return KernelUnderTest(CUSTOM, image, kernel_version(image),
                           find_tree(image, modules_dir), config, source)
