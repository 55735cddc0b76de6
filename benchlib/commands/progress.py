"""The main job's progress on stderr, while it runs: as text lines (the default),
as one JSON object a line (--progress=json), or not at all (--quiet).

  text   ==> [run 14:02:11] [3/12] tcg-quiet × stock matrix boot 1/3: final
         milestone crng init done after 41 s, about 6 min of boots left
  json   {"time": "2026-01-01T14:02:11+01:00", "event": "boot_finished",
          "message": "<the text line's words>", "profile": "tcg-quiet", ...}

Every event has "time" (ISO 8601, with the UTC offset), "event" ("message",
"boot_started" or "boot_finished") and "message". A boot event also has profile,
variant, workload, boot and boots (its number in its cell, of how many), host
(with several hosts, else null), done and planned (boots of the whole run),
outcome and seconds (once it finished, else null) and eta_s (benchlib/commands/eta.py:
null until a boot finished). Errors, the report and its path are not progress:
the run prints them in every style.
"""
from __future__ import annotations

import json
import sys
import threading
from dataclasses import dataclass
from datetime import datetime
from typing import Callable, Optional, TextIO

from ..report.report import minutes
from .eta import BootKey, Eta, Tally

TEXT, JSON, QUIET = "text", "json", "quiet"
STYLES = (TEXT, JSON)       # --progress's choices; --quiet is QUIET


def local_now() -> datetime:
    return datetime.now().astimezone()


@dataclass(frozen=True)
class BootLabel:
    """Which boot an event is about."""
    key: BootKey
    n: int              # its number among its cell's boots
    of: int             # the cell's boots
    host: Optional[str] = None      # named when the run has several hosts

    def text(self) -> str:
        return (f"{self.key.profile} × {self.key.variant} {self.key.workload} boot "
                f"{self.n}/{self.of}" + (f" on {self.host}" if self.host else ""))


def left_text(seconds: Optional[float]) -> str:
    """', about 6 min of boots left', or nothing without an estimate or boots left."""
    return f", about {minutes(seconds)} of boots left" if seconds else ""


def boot_fields(boot: BootLabel, tally: Tally, outcome: Optional[str],
                seconds: Optional[float]) -> dict[str, object]:
    """A boot event's fields past time, event and message."""
    return {"profile": boot.key.profile, "variant": boot.key.variant,
            "workload": boot.key.workload, "boot": boot.n, "boots": boot.of, "host": boot.host,
            "done": tally.done, "planned": tally.planned, "outcome": outcome,
            "seconds": None if seconds is None else round(seconds, 1),
            "eta_s": None if tally.left_s is None else round(tally.left_s, 1)}


class Progress:
    """Where the run's progress goes. Its methods may be called from any thread:
    each event is written whole, as one line."""

    def __init__(self, style: str = TEXT, stream: Optional[TextIO] = None,
                 now: Callable[[], datetime] = local_now) -> None:
        if style not in (*STYLES, QUIET):
            raise ValueError(f"progress style {style!r}: not one of {STYLES + (QUIET,)}")
        self.style = style
        self._stream = stream
        self._now = now
        self._lock = threading.Lock()

    def message(self, text: str) -> None:
        self._emit("message", text, {})

    def boot_started(self, boot: BootLabel, eta: Eta) -> None:
        self._emit("boot_started", f"{boot.text()} started",
                   boot_fields(boot, eta.tally(), None, None))

    def boot_finished(self, boot: BootLabel, outcome: str, seconds: float, eta: Eta) -> None:
        tally = eta.tally()
        self._emit("boot_finished", f"[{tally.done}/{tally.planned}] {boot.text()}: {outcome} "
                                    f"after {seconds:.0f} s{left_text(tally.left_s)}",
                   boot_fields(boot, tally, outcome, seconds))

    def _emit(self, event: str, text: str, fields: dict[str, object]) -> None:
        if self.style == QUIET:
            return
        when = self._now()
        if self.style == JSON:
            line = json.dumps({"time": when.isoformat(timespec="seconds"), "event": event,
                               "message": text, **fields}, ensure_ascii=False)
        else:
            line = f"==> [run {when.strftime('%H:%M:%S')}] {text}"
        with self._lock:
            stream = self._stream or sys.stderr
            stream.write(line + "\n")
            stream.flush()
