"""A variant's milestones in one boot's kernel log, checked against its
variant.toml: each printed at most once, in the order the file declares them.

Milestones may be skipped (a source that seeds the RNG directly jumps ahead), so
the order check is on the ones that printed; where interrupts are the only
source, every milestone must print.
"""
from __future__ import annotations

from ..core.bootrecord import BootRecord


def printed(record: BootRecord) -> list[tuple[float, str]]:
    """(printk time, milestone) of every kernel message that marks one, in log order."""
    spec = record.spec()
    found = []
    for t, text in record.messages:
        name = spec.milestone_of(text)
        if name is not None:
            found.append((t, name))
    return found


def assert_in_order(record: BootRecord, all_required: bool) -> list[str]:
    """The milestones printed, each once, in declared order, ending at the final
    one; with all_required, every declared milestone printed."""
    spec = record.spec()
    declared = list(spec.milestones)
    seen = [name for _, name in printed(record)]
    assert seen, f"no milestone of '{record.variant}' in the kernel log ({record.data_log})"
    repeated = sorted({name for name in seen if seen.count(name) > 1})
    assert not repeated, f"printed more than once: {repeated} (order {seen})"
    assert seen == sorted(seen, key=declared.index), (
        f"milestones printed as {seen}, declared order {declared}")
    assert seen[-1] == spec.final, (
        f"milestones printed {seen}: the final one, '{spec.final}', never came in this boot")
    if all_required:
        assert seen == declared, (
            f"interrupts alone feed this RNG, yet the milestones were {seen}, not {declared}")
    return seen
