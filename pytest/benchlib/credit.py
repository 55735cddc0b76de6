"""Interrupt crediting: kprobe hist output, and the crediting rule of stock 6.1.

6.1's mix_interrupt_randomness() credits each fast-pool spill with
clamp((count & 0xffff) / 64, 1, sizeof(pool) * 8) bits (drivers/char/random.c).
"""
from __future__ import annotations

import re

# sizeof(fast_pool.pool) * 8 on 64-bit: four longs.
FAST_POOL_BITS = 256
# One bit of credit per this many interrupts in a spill.
INTERRUPTS_PER_BIT = 64
COUNT_MASK = 0xFFFF

HIST_ENTRY = re.compile(r"^\{\s*(?P<keys>.*?)\s*\}\s+hitcount:\s+(?P<hits>\d+)")


def parse_hist(lines: list[str]) -> list[tuple[dict[str, str], int]]:
    """A hist trigger's output -> [(keys, hitcount)]. Keys keep their printed text."""
    entries = []
    for line in lines:
        match = HIST_ENTRY.match(line.strip())
        if not match:
            continue
        keys = {}
        for part in match.group("keys").split(","):
            name, _, value = part.partition(":")
            keys[name.strip()] = value.strip()
        entries.append((keys, int(match.group("hits"))))
    return entries


def hits_by(entries: list[tuple[dict[str, str], int]], key: str) -> dict[str, int]:
    totals: dict[str, int] = {}
    for keys, hits in entries:
        totals[keys[key]] = totals.get(keys[key], 0) + hits
    return totals


def stock_spill_credit(count: int) -> int:
    """Bits 6.1 credits for one fast-pool spill of `count` interrupts."""
    return min(max((count & COUNT_MASK) // INTERRUPTS_PER_BIT, 1), FAST_POOL_BITS)


def expected_credit(spill_counts: dict[int, int], rule=stock_spill_credit) -> int:
    """Total bits for spills given as {count: how many spills had it}."""
    return sum(rule(count) * n for count, n in spill_counts.items())
