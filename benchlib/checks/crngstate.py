"""The crng variant's debugfs file (/sys/kernel/debug/random/crng), parsed.

One `key: value` per line; per-CPU, per-node and per-transition keys are numbered
(fast_loads_cpuN, nodeN_generation, nodeN_reads, transitionK). Never key material.
"""
from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Transition:
    to: int
    uptime_ms: int
    cause: str          # "fastload" or "reseed"
    trigger: str        # fastload: "threshold", "flush" or "first"; reseed: "credit"
    cpu: int
    irqs: int           # the fast pool's interrupt count at the spill
    credited_bits: int  # the input pool's credited bits at that moment


@dataclass
class CrngState:
    fields: dict[str, str]

    def int(self, key: str) -> int:
        return int(self.fields[key])

    def numbered(self, prefix: str, suffix: str = "") -> dict[int, int]:
        """{N: value} for keys prefix<N>suffix, e.g. numbered("node", "_reads")."""
        found = {}
        for key, value in self.fields.items():
            match = re.fullmatch(rf"{prefix}(\d+){suffix}", key)
            if match:
                found[int(match.group(1))] = int(value)
        return found

    def transitions(self) -> list[Transition]:
        result = []
        for k in sorted(self.numbered_keys("transition")):
            f = dict(w.split("=", 1) for w in self.fields[f"transition{k}"].split())
            result.append(Transition(int(f["to"]), int(f["uptime_ms"]), f["cause"],
                                     f["trigger"], int(f["cpu"]), int(f["irqs"]),
                                     int(f["credited_bits"])))
        return result

    def numbered_keys(self, prefix: str) -> list[int]:
        return [int(k[len(prefix):]) for k in self.fields
                if k.startswith(prefix) and k[len(prefix):].isdigit()]


def parse_crng_state(lines: list[str]) -> CrngState:
    fields = {}
    for line in lines:
        key, sep, value = line.partition(":")
        if sep and key.strip():
            fields[key.strip()] = value.strip()
    if "crng_init" not in fields:
        raise ValueError(f"not a crng debugfs file: {lines[:3]}")
    return CrngState(fields)
