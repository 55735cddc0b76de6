"""Guests that are saved and restored: one saved image, restored once or several times.

A restored guest is a second kind of boot: the guest goes on from where it was
saved, in a new QEMU process. `SavedGuest` is a guest.Guest, started from a
BootRequest as every guest is (name, folder, initramfs with modules, domain XML,
paused start), but saveable: without autodestroy (libvirt refuses to save such a
domain), its channel files appended to. It waits for a
line on the data channel, saves the guest to a file in the boot's folder, and
restores that file as often as asked:

  - in place (`restore()`): the same domain, the same logs, the data log appended;
  - as a clone (`restore_clone()`): the same domain with logs of its own, one clone
    after another. libvirt's own way: the saved image's XML (saveImageGetXMLDesc)
    with only the logs' paths changed, given to restoreFlags. libvirt refuses a
    restore whose name, UUID or generation ID differ from the saved domain's (its
    ABI check), so one daemon runs the clones of one image in turn, never at once;
    and it gives the domain a new generation ID at each restore where the domain
    was defined with an empty `<genid/>` (checked: `genid()` reads it back).

Every domain it created is destroyed and every saved image deleted on leaving the
`with` block, pass or fail; the logs stay. A failed step is a one-line BenchError
naming the step and the domain.
"""
from __future__ import annotations

import shutil
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import libvirt

from .channels import wire
from ..core.errors import BenchError
from .guest import BootRequest, Guest, destroy_if_running

# Space a saved image needs beyond the guest's RAM (device state, headers).
SAVE_SLACK_BYTES = 64 << 20


class RestoreFailed(BenchError):
    """A save or restore step failed: the message names the step and the domain."""


@dataclass
class Restored:
    """One restored domain and its own logs."""
    name: str
    console_log: Path
    data_log: Path
    dom: libvirt.virDomain

    def gone(self) -> bool:
        try:
            return not self.dom.isActive()
        except libvirt.libvirtError:
            return True


def clone_xml(saved_xml: str, console_log: Path, data_log: Path, profile: str) -> str:
    """The saved image's domain XML with the clone's own console and data logs:
    nothing else may change (see above)."""
    return wire(saved_xml, console_log, data_log, profile)


def genid(dom: libvirt.virDomain) -> Optional[str]:
    """The running domain's VM generation ID, or None if it has none."""
    return ET.fromstring(dom.XMLDesc(0)).findtext("genid")


class SavedGuest(Guest):
    """`with SavedGuest(conn, request, kind) as guest:` a guest to save and restore:
    a saveable Guest (no autodestroy, channel files appended to)."""

    WAIT_FAILED = RestoreFailed

    def __init__(self, conn: libvirt.virConnect, request: BootRequest, kind: str) -> None:
        super().__init__(conn, request, kind=kind, saveable=True)
        self.images: list[Path] = []

    def __enter__(self) -> "SavedGuest":
        try:
            super().__enter__()     # a failed start has already cleaned up
        except BenchError as exc:
            name = self._ready.name if self._ready is not None else self.kind
            raise RestoreFailed(f"start {name}: {exc}") from None
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        try:
            super().__exit__(exc_type, exc, tb)
        finally:
            for image in self.images:
                image.unlink(missing_ok=True)

    def save(self, label: str = "saved") -> Path:
        """Save the running guest to a file in its folder (the domain ends)."""
        assert self.dom is not None
        image = self.ready.outdir / label
        need = self.dom.info()[1] * 1024 + SAVE_SLACK_BYTES
        free = shutil.disk_usage(self.ready.outdir).free
        if free < need:
            raise RestoreFailed(f"save {self.ready.name}: {free >> 20} MiB free in "
                                f"{self.ready.outdir}, the image needs up to {need >> 20} MiB")
        self.images.append(image)
        try:
            self.dom.save(str(image))
        except libvirt.libvirtError as exc:
            raise RestoreFailed(f"save {self.ready.name} to {image}: "
                                f"{exc.get_error_message()}") from None
        return image

    def restore(self, image: Path) -> None:
        """Restore the saved image in place: the same domain and logs."""
        try:
            self.conn.restore(str(image))
            self.dom = self.conn.lookupByName(self.ready.name)
        except libvirt.libvirtError as exc:
            raise RestoreFailed(f"restore {self.ready.name} from {image}: "
                                f"{exc.get_error_message()}") from None

    def restore_clone(self, image: Path, label: str) -> Restored:
        """Restore the saved image as a clone with logs of its own (in a folder
        `label` of the boot's), once the previous clone has ended."""
        folder = self.ready.outdir / label
        folder.mkdir(exist_ok=True)
        console_log, data_log = folder / "console.log", folder / "data.log"
        try:
            xml = clone_xml(self.conn.saveImageGetXMLDesc(str(image), 0), console_log, data_log,
                            self.request.profile.name)
        except libvirt.libvirtError as exc:
            raise RestoreFailed(f"read the domain of {image}: {exc.get_error_message()}") \
                from None
        (folder / "domain.xml").write_text(xml)
        destroy_if_running(self.conn, self.ready.name)
        try:
            self.conn.restoreFlags(str(image), xml, 0)
            dom = self.conn.lookupByName(self.ready.name)
        except libvirt.libvirtError as exc:
            raise RestoreFailed(f"restore {image} as {label} of {self.ready.name}: "
                                f"{exc.get_error_message()}") from None
        self.dom = dom
        return Restored(label, console_log, data_log, dom)
