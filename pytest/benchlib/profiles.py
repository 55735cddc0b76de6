"""Libvirt domain profiles: XML templates in vm-definitions/, one per hypervisor variant.

A profile fills in only what must be: paths (kernel, initrd, logs, emulator), the
bench's part of the command line, the domain's name and type. Templating is strict
(string.Template.substitute): a placeholder left unfilled is an error, never XML.
"""
from __future__ import annotations

import string
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

from .errors import UnknownProfile
from .paths import PROFILE_DIR

METADATA_NS = "urn:x-randomness-bench:profile:1"
PLACEHOLDERS = ("name", "domain_type", "emulator", "kernel", "initrd", "cmdline",
                "console_log", "data_log")


@dataclass(frozen=True)
class Profile:
    name: str
    path: Path
    description: str
    requires: str        # "any" accelerator, or "hyperv" (KVM, or our patched QEMU)

    @property
    def template(self) -> str:
        return self.path.read_text()

    def render(self, **values: str) -> str:
        missing = set(PLACEHOLDERS) - values.keys()
        if missing:
            raise ValueError(f"profile {self.name}: no value for {', '.join(sorted(missing))}")
        return string.Template(self.template).substitute(values)


def _read_profile(path: Path) -> Profile:
    # The template is XML except inside attribute/element text, so it parses as is.
    root = ET.fromstring(path.read_text())
    meta = root.find(f"metadata/{{{METADATA_NS}}}profile")
    if meta is None:
        raise ValueError(f"profile {path}: no <bench:profile> metadata")
    return Profile(
        name=path.stem,
        path=path,
        description=(meta.findtext(f"{{{METADATA_NS}}}description") or "").strip(),
        requires=(meta.findtext(f"{{{METADATA_NS}}}requires") or "any").strip(),
    )


def all_profiles(directory: Path = PROFILE_DIR) -> dict[str, Profile]:
    return {p.stem: _read_profile(p) for p in sorted(directory.glob("*.xml"), key=lambda p: p.stem)}


def get_profile(name: str, directory: Path = PROFILE_DIR) -> Profile:
    profiles = all_profiles(directory)
    if name not in profiles:
        raise UnknownProfile(f"unknown profile '{name}' (known: {', '.join(profiles)})")
    return profiles[name]
