#!/usr/bin/python3
"""What qemu/test-hyperv-tcg.sh asks of a running QEMU over QMP, through QEMU's own
Python QMP library (python/qemu/qmp in the source tree qemu/build.sh unpacked).

    qmp-action.py SOCKET save FILE   migrate the guest to FILE (what `virsh save`
                                     does), then quit that QEMU; fails when the
                                     migration fails or takes over MIGRATION_S
    qmp-action.py SOCKET hot-add     plug a vCPU into the last empty slot
                                     (device_add with the slot's properties, what
                                     `virsh setvcpus --live` does)
    qmp-action.py --check-library    only find and import the library

The library is looked for in $QEMU_PYTHON, else in $BUILD_DIR/qemu/src/qemu-*/python.
Exit status: 0 done, 1 QEMU refused or the action failed, 2 usage or no library.
"""
from __future__ import annotations

import glob
import os
import shlex
import sys
import time
from pathlib import Path
from typing import Any, NoReturn

# A migration of the bare-metal guest (64 MiB) takes well under a second; one
# that has not completed in a minute is stuck.
MIGRATION_S = 60
MIGRATION_POLL_S = 0.1
# How long to wait for QEMU's replies at all.
REPLY_TIMEOUT_S = 60


def die(message: str, status: int = 1) -> NoReturn:
    print(f"qmp-action.py: {message}", file=sys.stderr)
    sys.exit(status)


def library_path() -> str:
    """The folder holding the `qemu` package of QEMU's source tree."""
    if os.environ.get("QEMU_PYTHON"):
        return os.environ["QEMU_PYTHON"]
    build_dir = os.environ.get("BUILD_DIR") or str(Path(__file__).resolve().parent.parent / "build")
    found = sorted(glob.glob(f"{build_dir}/qemu/src/qemu-*/python"))
    if not found:
        die(f"no QEMU source tree under {build_dir}/qemu/src (run qemu/build.sh, "
            "or set QEMU_PYTHON to a folder holding qemu/qmp)", 2)
    return found[-1]


def hot_add(qmp: Any) -> None:
    empty = [c for c in qmp.command("query-hotpluggable-cpus") if "qom-path" not in c]
    if not empty:
        die("hot-add: no empty vCPU slot")
    # The last slot: one no vCPU ever had (an unplugged vCPU's slot aborts under
    # QEMU 7.2's MTTCG, which never gives its TCG context back).
    last = max(empty, key=lambda c: sorted(c["props"].items()))
    qmp.command("device_add", driver=last["type"], id="hot-added", **last["props"])


def save(qmp: Any, target: str) -> None:
    qmp.command("migrate", uri="exec:cat > " + shlex.quote(target))
    deadline = time.monotonic() + MIGRATION_S
    while (status := qmp.command("query-migrate").get("status")) not in ("completed", "failed"):
        if time.monotonic() > deadline:
            die(f"save: migration still '{status}' after {MIGRATION_S} s")
        time.sleep(MIGRATION_POLL_S)
    if status != "completed":
        die("save: migration failed")
    try:
        qmp.command("quit")
    except (EOFError, ConnectionError):
        pass        # QEMU may close the socket before its reply to quit arrives


def main(argv: list[str]) -> None:
    checking = argv == ["--check-library"]
    if not checking and (len(argv) < 2
                         or (argv[1], len(argv)) not in (("save", 3), ("hot-add", 2))):
        die("usage: qmp-action.py SOCKET save FILE | qmp-action.py SOCKET hot-add "
            "| qmp-action.py --check-library", 2)
    sys.path.insert(0, library_path())
    try:
        from qemu.qmp import QMPError
        from qemu.qmp.legacy import QEMUMonitorProtocol
    except ImportError as exc:
        die(f"QEMU's QMP library not importable from {sys.path[0]}: {exc}", 2)
    if checking:
        return
    qmp = QEMUMonitorProtocol(argv[0])
    try:
        qmp.connect()
        qmp.settimeout(REPLY_TIMEOUT_S)
        if argv[1] == "save":
            save(qmp, argv[2])
        else:
            hot_add(qmp)
    except QMPError as exc:
        die(f"{argv[1]}: QEMU said: {exc}")
    except OSError as exc:
        die(f"{argv[1]}: {argv[0]}: {exc}")
    finally:
        try:
            qmp.close()
        except (EOFError, ConnectionError):
            pass        # QEMU quit (save): its end of the socket is already gone


if __name__ == "__main__":
    main(sys.argv[1:])
