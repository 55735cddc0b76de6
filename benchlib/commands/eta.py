"""How long the boots still to run will take, from the boots of this run that finished.

A run says which boots it will make (`expect`), then each boot's wall time as it
finishes (`finished`). A boot still to run is costed at the mean of the finished
boots most like it, the first of these that has any:

  1. its own cell: the same profile and variant (and workload)
  2. its variant's boots (of the same workload)
  3. its profile's boots (of the same workload)
  4. every boot of its workload
  5. every boot

A workload is a kind of boot with its own length (benchlib/commands/run.py: the matrix's
boots wait for a milestone, the throughput boots run a benchmark): a throughput
boot is costed from the matrix only when no throughput boot has finished yet.
Each workload's boots run `at_once` at a time, so their sum is divided by that
(by fewer when fewer are left). Before the first boot finished there is no
estimate: None, rather than a guess.
"""
from __future__ import annotations

import statistics
import threading
from collections import Counter, defaultdict
from typing import Callable, Hashable, Iterable, Mapping, NamedTuple, Optional


class BootKey(NamedTuple):
    """What a boot's length depends on, as far as the estimate knows."""
    profile: str
    variant: str
    workload: str


# The samples a boot to run is costed from, most alike first (the docstring's order).
FALLBACKS: tuple[Callable[[BootKey], Hashable], ...] = (
    lambda key: ("cell", key),
    lambda key: ("variant", key.workload, key.variant),
    lambda key: ("profile", key.workload, key.profile),
    lambda key: ("workload", key.workload),
    lambda key: ("every boot",),
)


class Tally(NamedTuple):
    """The run's boots at one moment."""
    done: int
    planned: int
    left_s: Optional[float]     # Eta.seconds_left()


class Eta:
    """The boots of a run: how many are done, how many are planned, how long the
    rest will take. Safe to use from the threads that run the boots."""

    def __init__(self, at_once: Mapping[str, int]) -> None:
        """at_once: workload -> how many of its boots run at a time (1 if not named)."""
        self._at_once = dict(at_once)
        self._pending: Counter[BootKey] = Counter()
        self._done: Counter[str] = Counter()
        self._seconds: defaultdict[Hashable, list[float]] = defaultdict(list)
        self._lock = threading.RLock()

    def expect(self, keys: Iterable[BootKey]) -> None:
        """Boots to come, one per key."""
        with self._lock:
            self._pending.update(keys)

    def finished(self, key: BootKey, seconds: float) -> None:
        """A boot ended (well or not) after `seconds` of wall time. One that was
        not expected is counted all the same."""
        with self._lock:
            if self._pending[key] > 1:
                self._pending[key] -= 1
            else:
                del self._pending[key]
            self._done[key.workload] += 1
            for sample_set in FALLBACKS:
                self._seconds[sample_set(key)].append(seconds)

    def done(self, workload: Optional[str] = None) -> int:
        """Boots finished (of this workload, or of all)."""
        with self._lock:
            return self._done_count(workload)

    def planned(self, workload: Optional[str] = None) -> int:
        """Boots finished plus boots to come (of this workload, or of all)."""
        with self._lock:
            to_come = sum(n for key, n in self._pending.items()
                          if workload in (None, key.workload))
            return self._done_count(workload) + to_come

    def expected_seconds(self, key: BootKey) -> Optional[float]:
        """What one boot of this key is likely to take; None before any boot finished."""
        with self._lock:
            return self._expected(key)

    def seconds_left(self) -> Optional[float]:
        """Wall seconds until the boots to come are done; None before any boot finished."""
        with self._lock:
            if not self._seconds:
                return None
            total_s: defaultdict[str, float] = defaultdict(float)
            boots: Counter[str] = Counter()
            for key, count in self._pending.items():
                total_s[key.workload] += count * (self._expected(key) or 0.0)
                boots[key.workload] += count
            return sum((seconds / min(self._at_once.get(workload, 1), boots[workload])
                        for workload, seconds in total_s.items()), 0.0)

    def tally(self) -> Tally:
        """Done, planned and seconds left, read together."""
        with self._lock:
            return Tally(self.done(), self.planned(), self.seconds_left())

    def _done_count(self, workload: Optional[str]) -> int:
        return sum(n for w, n in self._done.items() if workload in (None, w))

    def _expected(self, key: BootKey) -> Optional[float]:
        for sample_set in FALLBACKS:
            samples = self._seconds.get(sample_set(key))
            if samples:
                return statistics.fmean(samples)
        return None
