"""Interrupt crediting: kprobe hist output, and the crediting rule of stock 6.1.

6.1's mix_interrupt_randomness() credits each fast-pool spill with
clamp((count & 0xffff) / 64, 1, sizeof(pool) * 8) bits (drivers/char/random.c).
"""
from __future__ import annotations

import re
from collections import Counter
from typing import Callable

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


# A spill this large credits more than the 1-bit floor, so the rule is visible.
DISCRIMINATING_SPILL = 2 * INTERRUPTS_PER_BIT
# The kprobes are switched on and off while the guest runs: one spill may be seen
# entering (mix) without its credit, or crediting without its entry, at each end.
EDGE_SPILLS = 2


def check_credit_rule(sections: dict[str, list[str]], rule: Callable[[int], int]) -> None:
    """Assert that the credits seen in a credit window are `rule` of the spills seen.

    Compared as multisets of credits: the spills' expected credits against the
    credits observed, equal but for at most EDGE_SPILLS at the window's ends. A
    rule that differs from the kernel's on the spills seen fails, and so does a
    window whose spills are all too small to tell rules apart."""
    spills = {int(k): n for k, n in hits_by(parse_hist(sections["hist mix"]), "count").items()}
    credits = {int(k): n for k, n in hits_by(parse_hist(sections["hist cred"]), "bits").items()}
    assert spills, "no fast-pool spill in the window"
    assert max(c & COUNT_MASK for c in spills) >= DISCRIMINATING_SPILL, (
        f"every spill was small ({spills}): this window cannot tell one rule from another")
    expected = Counter()
    for count, n in spills.items():
        expected[rule(count)] += n
    observed = Counter(credits)
    unexplained = (observed - expected) + (expected - observed)
    assert sum(unexplained.values()) <= EDGE_SPILLS, (
        f"credits seen {dict(observed)} (bits: spills) against the rule's {dict(expected)} "
        f"for spills {spills}")
    credited = sum(bits * n for bits, n in credits.items())
    grown = int(sections["entropy_after"][0]) - int(sections["entropy_before"][0])
    in_flight = max(credits, default=0)
    assert grown >= credited - in_flight, (
        f"entropy_avail grew by {grown}, less than the {credited} bits credited")
