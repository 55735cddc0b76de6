"""Made-up boot records for the harness's own tests (no guest): one place, so that
every test that needs a throughput boot builds it the same way."""
from __future__ import annotations

from pathlib import Path

from . import throughput
from .record import BootRecord


def throughput_records(variant: str, mb_s: list[float], threads: int = 1) -> list[BootRecord]:
    """One boot per figure, each with one grbench case of `threads` threads × 4 KiB."""
    records = []
    for i, rate in enumerate(mb_s):
        record = BootRecord(name=f"bench-{variant}-{i}", profile=throughput.PROFILE,
                            variant=variant, kernel="k", accel="tcg", cmdline="",
                            console_log=Path("c"), data_log=Path("d"))
        record.probe = [{"event": "throughput", "threads": str(threads), "size": "4096",
                         "bytes": str(int(rate * 1e6)), "seconds": "1.0"}]
        records.append(record)
    return records
