"""One traced boot of a variant, as the per-variant tests use it: the variant's
kprobe trace set armed from fs_initcall, the probe first (a blocking reader and
an EINTR reader), then console noise, started once the probe's early calls are in
flight, until the variant's final milestone or a cap."""
from __future__ import annotations

import functools
from typing import Callable, Optional

from ..core.bootrecord import BootRecord
from ..core.variants import load

# Noise lines written as fast as the UART takes them until the final milestone
# stops them: a bound, not a target.
NOISE_LINES = 100000
# How long a boot may wait for the final milestone (the report measures idle guests).
UNTIL_CAP_S = 120


def traced_boot(boot_guest: Callable[..., BootRecord], profile: str, variant: str,
                tasks: tuple[str, ...], noise: int = NOISE_LINES,
                noise_gap: str = "0", trace: Optional[str] = None) -> BootRecord:
    """trace: a trace set other than the variant's own (one that includes it)."""
    spec = load(variant)
    return boot_guest(profile, tasks=list(tasks), variant=variant, trace=trace or spec.trace,
                      params={"probe": "bi", "noise_bg": str(noise), "noise_gap": noise_gap,
                              "until": spec.until_pattern(), "until_cap": str(UNTIL_CAP_S)})


def cached(boot_guest: Callable[..., BootRecord], bench_variant: Callable[[str], str],
           default_variant: str, tasks: tuple[str, ...],
           trace: Optional[str] = None) -> Callable[..., BootRecord]:
    """boot(profile, variant=default_variant) -> one traced boot's record, booted
    once per (profile, variant) and shared by the tests that read it."""

    @functools.cache
    def _boot(profile: str, variant: str = default_variant) -> BootRecord:
        return traced_boot(boot_guest, profile, bench_variant(variant), tasks, trace=trace)

    return _boot
