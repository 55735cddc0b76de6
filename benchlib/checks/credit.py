"""Interrupt crediting: kprobe hist output, and the variants' crediting rules.

6.1's mix_interrupt_randomness() credits each fast-pool spill with
clamp((count & 0xffff) / 64, 1, sizeof(pool) * 8) bits, where pool is its local
copy `unsigned long pool[2]`: at most 128 bits (drivers/char/random.c).
"""
from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from typing import Callable, Optional

from .trace import kprobe_misses

# sizeof(pool) * 8 for mix_interrupt_randomness()'s `unsigned long pool[2]` on
# 64-bit: the most one spill can be credited.
SPILL_CREDIT_CAP = 128
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


def signed_key(text: str) -> int:
    """A hist key fetched as a signed type: the hist prints it as a 64-bit unsigned
    number (-61 as 18446744073709551555)."""
    value = int(text)
    return value - (1 << 64) if value >= 1 << 63 else value


def window_hist(sections: dict[str, list[str]], event: str,
                required: bool = True) -> list[tuple[dict[str, str], int]]:
    """An event's hits inside the credit window: its hist when the window closed
    less its hist when it opened (the kprobes are switched on before the window
    and stay on through it: fixtures/init, credit_window)."""
    name = f"hist {event}"
    if required and name not in sections:
        raise KeyError(f"the credit window printed no '{name}' section")
    before: dict[tuple[tuple[str, str], ...], int] = {}
    for keys, hits in parse_hist(sections.get(f"hist_before {event}", [])):
        before[tuple(sorted(keys.items()))] = hits
    found = []
    for keys, hits in parse_hist(sections.get(name, [])):
        grown = hits - before.get(tuple(sorted(keys.items())), 0)
        if grown:
            found.append((keys, grown))
    return found


def hits_by(entries: list[tuple[dict[str, str], int]], key: str) -> dict[str, int]:
    totals: dict[str, int] = {}
    for keys, hits in entries:
        totals[keys[key]] = totals.get(keys[key], 0) + hits
    return totals


def stock_spill_credit(count: int) -> int:
    """Bits 6.1 credits for one fast-pool spill of `count` interrupts."""
    return min(max((count & COUNT_MASK) // INTERRUPTS_PER_BIT, 1), SPILL_CREDIT_CAP)


def expected_credit(spill_counts: dict[int, int], rule=stock_spill_credit) -> int:
    """Total bits for spills given as {count: how many spills had it}."""
    return sum(rule(count) * n for count, n in spill_counts.items())


# A spill this large credits more than the 1-bit floor, so the rule is visible.
DISCRIMINATING_SPILL = 2 * INTERRUPTS_PER_BIT
# The kprobes are switched on and off while the guest runs: one spill may be seen
# entering (mix) without its credit, or crediting without its entry, at each end.
EDGE_SPILLS = 2


def check_credit_rule(sections: dict[str, list[str]], rule: Callable[[int], int],
                      discriminating: bool = True) -> None:
    """Assert that the credits seen in a credit window are `rule` of the spills seen.

    Compared as multisets of credits: the spills' expected credits against the
    credits observed, equal but for at most EDGE_SPILLS at the window's ends. A
    rule that differs from the kernel's on the spills seen fails, and so does a
    window whose spills are all too small to tell rules apart, unless the caller
    asks only whether the spills were credited (`discriminating` False)."""
    spills = {int(k): n for k, n in hits_by(window_hist(sections, "mix"), "count").items()}
    credits = {int(k): n for k, n in hits_by(window_hist(sections, "cred"), "bits").items()}
    assert spills, "no fast-pool spill in the window"
    assert not discriminating or max(c & COUNT_MASK for c in spills) >= DISCRIMINATING_SPILL, (
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


# The LRNG (kernel/patches/lrng): every interrupt whose time stamp passes the stuck
# test is credited 256/288 bits on its own (256/864 without a high-resolution
# timer); there is no fast pool.
LRNG_CREDIT = {(256, 288), (256, 864)}
LRNG_BITS_PER_INTERRUPT = 256 / 288      # with a high-resolution timer, as here
# The window is the difference of two hist snapshots, the kprobes on and settled
# throughout (fixtures/init, credit_window): at the start outcomes are read before
# entries, at the end entries before outcomes. An interrupt seen entering in the
# window then has its outcome seen too, bar hits the kprobes missed (kprobe_profile).
# (Switching kprobes on and off at the window's edges instead lost up to 0.6 % of
# the outcomes silently: switching one re-patches the ftrace call sites the others
# share.) Outcomes without an entry are interrupts that entered while the start
# snapshot was being read, or left it while the end one was: about 1 %, far fewer
# than this share (an LRNG that credited each interrupt twice would have as many
# as it has interrupts).
UNMATCHED_OUTCOME_SHARE = 0.05
LRNG_INTERRUPT_EVENTS = ("air", "cred", "stuck")


def check_lrng_credit(sections: dict[str, list[str]], discriminating: bool = True) -> None:
    """Every interrupt that entered the LRNG in the window was credited the seed's
    256/288 bits, or rejected by the stuck test, and nothing else happened to it.
    (Each interrupt is credited on its own: any window tells rules apart, so
    `discriminating` changes nothing.)"""
    del discriminating
    entered = sum(hits for _, hits in window_hist(sections, "air"))
    credits = {(int(k["num"]), int(k["den"])): n for k, n in window_hist(sections, "cred")}
    stuck = sum(hits for _, hits in window_hist(sections, "stuck", required=False))
    credited = sum(credits.values())
    misses = kprobe_misses(sections)
    missed = sum(misses.get(event, 0) for event in LRNG_INTERRUPT_EVENTS)
    assert entered > 0, "no interrupt entered the LRNG in the window"
    assert credited > 0, f"{entered} interrupts entered the LRNG, none was credited"
    assert set(credits) <= LRNG_CREDIT, (
        f"credited at {sorted(credits)} (num, den) bits per interrupt, not the seed's "
        f"{sorted(LRNG_CREDIT)}")
    assert entered <= credited + stuck + missed, (
        f"{entered} interrupts entered the LRNG; {credited} were credited and {stuck} "
        f"rejected as stuck (the kprobes missed {missed} hits): the rest went nowhere")
    assert credited + stuck - entered <= UNMATCHED_OUTCOME_SHARE * entered, (
        f"{credited} interrupts credited and {stuck} rejected as stuck, but only {entered} "
        "entered the LRNG: some were credited more than once")


@dataclass(frozen=True)
class CreditRule:
    """How a variant credits interrupts, and over which part of its boot ("ready"
    is the variant's ready milestone; None: no bound). `check` asserts it on a
    credit window's sections, observed with the guest's kprobe set `kprobes`
    (fixtures/kprobes-NAME)."""
    name: str
    check: Callable[..., None]       # (sections, discriminating=True)
    from_milestone: Optional[str]    # before it, interrupts credit nothing (fast loads)
    until_milestone: Optional[str]   # from it on, nothing is credited
    bits_per_interrupt: float        # nominal credit of one interrupt, where credited
    kprobes: str = "vmbus"


def spill_rule(per_spill: Callable[[int], int]) -> Callable[..., None]:
    return lambda sections, discriminating=True: check_credit_rule(sections, per_spill,
                                                                   discriminating)


# By the name a variant's variant.toml gives as credit_rule.
CREDIT_RULES = {
    # 6.1: count/64 per spill until the CRNG is ready, nothing afterwards.
    "stock": CreditRule("stock", spill_rule(stock_spill_credit), None, "ready",
                        1 / INTERRUPTS_PER_BIT),
    # The crng variant in rfc mode: spills below state 2 are fast loads (no
    # credit); from 2 on, 6.1's count/64 per spill, with no end.
    "rfc": CreditRule("rfc", spill_rule(stock_spill_credit), "ready", None,
                      1 / INTERRUPTS_PER_BIT),
    # The LRNG: 256/288 bits per interrupt that passes the stuck test, always.
    "lrng": CreditRule("lrng", check_lrng_credit, None, None,
                       LRNG_BITS_PER_INTERRUPT, kprobes="vmbus-lrng"),
}
