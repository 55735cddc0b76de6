"""A host that does not share our files: the kernel and initramfs go up by libvirt.

The kernel and the initramfs go up as storage volumes of the host's pool (default
"bench"), named by their content's hash so that each is uploaded once per host
(virStorageVolUpload through a stream). The serial ports come back down through
libvirt streams (benchlib/boot/channels.py).
"""
from __future__ import annotations

import hashlib
import time
from pathlib import Path
from typing import Optional

import libvirt

from ..core.errors import BenchError

DEFAULT_POOL = "bench"
UPLOAD_CHUNK = 1 << 20
# Volume names: what the file is, then the start of its SHA-256.
DIGEST_CHARS = 20
# A volume without its marker is being uploaded by another process, for at most
# this long; after that it is taken for a leftover of a killed run.
UPLOAD_WAIT_S = 120.0
UPLOAD_POLL_S = 0.5


def find_pool(conn: libvirt.virConnect, name: str) -> libvirt.virStoragePool:
    try:
        pool = conn.storagePoolLookupByName(name)
    except libvirt.libvirtError:
        raise BenchError(
            f"libvirt host '{conn.getURI()}' has no storage pool '{name}' for the bench's "
            f"uploads: create one there (virsh pool-define-as {name} dir --target "
            f"/var/lib/libvirt/{name} && virsh pool-build {name} && virsh pool-start "
            f"{name})") from None
    if not pool.isActive():
        raise BenchError(f"libvirt host '{conn.getURI()}': storage pool '{name}' is not "
                         f"active (virsh pool-start {name})")
    return pool


def _vol(pool: libvirt.virStoragePool, name: str) -> Optional[libvirt.virStorageVol]:
    try:
        return pool.storageVolLookupByName(name)
    except libvirt.libvirtError:
        return None


def _create(pool: libvirt.virStoragePool, name: str, size: int) -> Optional[libvirt.virStorageVol]:
    """A new raw volume, or None if another process created it first."""
    try:
        return pool.createXML(f"<volume><name>{name}</name><capacity unit='B'>{size}"
                              "</capacity><target><format type='raw'/></target></volume>", 0)
    except libvirt.libvirtError:
        if _vol(pool, name) is not None:
            return None
        raise


def _send(conn: libvirt.virConnect, vol: libvirt.virStorageVol, data: bytes) -> None:
    stream = conn.newStream(0)
    try:
        vol.upload(stream, 0, len(data), 0)
        view = memoryview(data)
        for offset in range(0, len(data), UPLOAD_CHUNK):
            chunk = view[offset:offset + UPLOAD_CHUNK]
            while chunk:
                sent = stream.send(bytes(chunk))
                chunk = chunk[sent:]
        stream.finish()
    except libvirt.libvirtError:
        stream.abort()
        raise


def upload(conn: libvirt.virConnect, pool_name: str, path: Path, kind: str) -> str:
    """The host-side path of a volume holding `path`'s bytes, uploaded unless the
    pool has that content already. A volume counts once its marker volume
    ("<name>.done") exists: an upload that was cut off is done again, and a
    process that finds another one uploading the same content waits for it."""
    pool = find_pool(conn, pool_name)
    data = path.read_bytes()
    name = f"bench-{kind}-{hashlib.sha256(data).hexdigest()[:DIGEST_CHARS]}"
    done = f"{name}.done"
    deadline = time.monotonic() + UPLOAD_WAIT_S
    while True:
        pool.refresh(0)
        vol = _vol(pool, name)
        if vol is not None and _vol(pool, done) is not None:
            return vol.path()
        if vol is None:
            vol = _create(pool, name, len(data))
            if vol is not None:
                break
        elif time.monotonic() > deadline:      # left by a run that was killed
            vol.delete(0)
            continue
        time.sleep(UPLOAD_POLL_S)
    try:
        _send(conn, vol, data)
        _create(pool, done, 1)
    except libvirt.libvirtError as exc:
        vol.delete(0)
        raise BenchError(f"uploading {path} to '{conn.getURI()}' pool '{pool_name}' "
                         f"failed: {exc.get_error_message()}") from None
    return vol.path()
