"""What the VMBus tests read from a `vmbus` task: who fed the RNG, from where."""
from __future__ import annotations

from .credit import window_hist
from .procfs import parse_interrupts

# arch/x86/include/asm/irq_vectors.h: the vector vmbus_isr() is entered on and
# passes to add_interrupt_randomness().
HYPERVISOR_CALLBACK_VECTOR = 0xF3
HYP_ROW = "HYP"
# Where a sample from vmbus_isr() appears to come from: vmbus_isr() ends in a tail
# call, so the return address is in the function that called it through
# vmbus_handler, __sysvec_hyperv_callback(); a non-tail call would show vmbus_isr.
VMBUS_PATH_CALLERS = ("vmbus_isr", "__sysvec_hyperv_callback")
# Samples against /proc/interrupts growth: generous, as in the credit tests.
SAMPLES_PER_COUNT_MIN, SAMPLES_PER_COUNT_MAX, SAMPLES_SLACK = 0.5, 2.0, 16


def samples_by_caller(sections: dict[str, list[str]]) -> dict[tuple[str, int], int]:
    """{(caller symbol, irq): samples} from the caller-keyed add_interrupt_randomness hist."""
    found: dict[tuple[str, int], int] = {}
    for keys, hits in window_hist(sections, "air"):
        caller = keys["caller"].split("+")[0].strip("[]").split()[-1]
        key = (caller, int(keys["irq"]))
        found[key] = found.get(key, 0) + hits
    return found


def hyp_growth(sections: dict[str, list[str]]) -> int:
    before = parse_interrupts(sections["interrupts_before"]).get(HYP_ROW, 0)
    return parse_interrupts(sections["interrupts_after"]).get(HYP_ROW, 0) - before


def via_vmbus_isr(sections: dict[str, list[str]]) -> int:
    """Samples on the vmbus_isr path: the callback vector, from vmbus_isr or its caller."""
    return sum(n for (caller, irq), n in samples_by_caller(sections).items()
               if irq == HYPERVISOR_CALLBACK_VECTOR and caller in VMBUS_PATH_CALLERS)


def vmbus_isr_entries(sections: dict[str, list[str]]) -> int:
    return sum(n for _, n in window_hist(sections, "visr"))


def within_bounds(samples: int, count: int) -> bool:
    return SAMPLES_PER_COUNT_MIN * count <= samples <= SAMPLES_PER_COUNT_MAX * count + SAMPLES_SLACK


def assert_vmbus_isr_feeds_rng(sections: dict[str, list[str]]) -> int:
    """Assert that vmbus_isr called add_interrupt_randomness with the callback vector,
    about as often as vmbus_isr ran and as the HYP row grew; return the samples."""
    samples = samples_by_caller(sections)
    via_vmbus, entries = via_vmbus_isr(sections), vmbus_isr_entries(sections)
    grown = hyp_growth(sections)
    assert grown > 0 and entries > 0, (
        f"HYP grew by {grown} and vmbus_isr ran {entries} times: no VMBus interrupts")
    assert via_vmbus > 0, (f"no add_interrupt_randomness call from vmbus_isr with vector "
                           f"{HYPERVISOR_CALLBACK_VECTOR:#x} while HYP grew by {grown} and "
                           f"vmbus_isr ran {entries} times: {samples}")
    assert within_bounds(via_vmbus, entries) and within_bounds(via_vmbus, grown), (
        f"{via_vmbus} samples from vmbus_isr against {entries} vmbus_isr entries and "
        f"HYP growth of {grown}")
    return via_vmbus


def vmbus_share(sections: dict[str, list[str]]) -> float:
    total = sum(samples_by_caller(sections).values())
    return via_vmbus_isr(sections) / total if total else 0.0


# Direct-mode synthetic timers (hv-stimer-direct): Linux 6.1 takes each expiry on
# HYPERV_STIMER0_VECTOR (arch/x86/include/asm/irq_vectors.h) in
# sysvec_hyperv_stimer0(), counted in the HVS row, and its body
# __sysvec_hyperv_stimer0() calls add_interrupt_randomness() (not as a tail call:
# the APIC is acked after it), so the return address is in that body.
HYPERV_STIMER0_VECTOR = 0xED
HVS_ROW = "HVS"
STIMER_PATH_CALLERS = ("__sysvec_hyperv_stimer0", "sysvec_hyperv_stimer0")
# What a mode's ticks look like: the vector, the callers that sample it, the row
# of /proc/interrupts that counts them.
TICK_PATHS = {
    "direct": (HYPERV_STIMER0_VECTOR, STIMER_PATH_CALLERS, HVS_ROW),
    "message": (HYPERVISOR_CALLBACK_VECTOR, VMBUS_PATH_CALLERS, HYP_ROW),
}
TSC_PAGE_CLOCKSOURCE = "hyperv_clocksource_tsc_page"


def row_per_cpu(lines: list[str], row: str) -> list[int] | None:
    """One row of /proc/interrupts, per CPU; None if the row is not there."""
    header = next((line for line in lines if line.strip().startswith("CPU")), None)
    ncpu = len(header.split()) if header else 1
    for line in lines:
        label, sep, rest = line.partition(":")
        if sep and label.strip() == row:
            return [int(w) for w in rest.split()[:ncpu] if w.isdigit()]
    return None


def growth_per_cpu(sections: dict[str, list[str]], row: str) -> list[int] | None:
    before = row_per_cpu(sections["interrupts_before"], row)
    after = row_per_cpu(sections["interrupts_after"], row)
    if after is None:
        return None
    return [a - b for a, b in zip(after, before or [0] * len(after))]


def via_path(sections: dict[str, list[str]], mode: str) -> int:
    vector, callers, _ = TICK_PATHS[mode]
    return sum(n for (caller, irq), n in samples_by_caller(sections).items()
               if irq == vector and caller in callers)


def assert_ticks_take_path(sections: dict[str, list[str]], mode: str) -> int:
    """The synthetic timer's ticks reach add_interrupt_randomness on the mode's
    vector from the mode's handler, about as often as the mode's row grew, and
    that row grew on every CPU; the other mode's path carries no ticks."""
    vector, callers, row = TICK_PATHS[mode]
    per_cpu = growth_per_cpu(sections, row)
    assert per_cpu is not None, f"no {row} row in /proc/interrupts ({mode} mode)"
    assert per_cpu and all(n > 0 for n in per_cpu), (
        f"the {row} row did not grow on every CPU in the window: {per_cpu}")
    samples = via_path(sections, mode)
    grown = sum(per_cpu)
    assert samples > 0, (f"no add_interrupt_randomness call with vector {vector:#x} from "
                         f"{'/'.join(callers)} while {row} grew by {grown}: "
                         f"{samples_by_caller(sections)}")
    assert within_bounds(samples, grown), (
        f"{samples} samples from {'/'.join(callers)} against {row} growth of {grown}")
    if mode == "direct":
        # vmbus_isr sees VMBus traffic only, no ticks: far fewer than HVS counted.
        entries = vmbus_isr_entries(sections)
        assert entries * 10 < grown, (
            f"vmbus_isr ran {entries} times against {grown} direct-mode ticks: "
            "the ticks still come as SynIC messages")
    else:
        hvs = growth_per_cpu(sections, HVS_ROW)
        assert not hvs or sum(hvs) == 0, f"HVS grew by {hvs} in message mode"
    return samples


def noise_irq(sections: dict[str, list[str]]) -> int | None:
    """The interrupt line the window's console noise raised ("@@NOISE irq=N ..."),
    or None for a window without noise."""
    for line in sections.get("noise", []):
        if line.startswith("@@NOISE ") and " irq=" in line:
            return int(line.split(" irq=", 1)[1].split()[0])
    return None


def path_share(sections: dict[str, list[str]], mode: str) -> float:
    """The timer mode's path's share of the window's samples, the bench's own
    console noise left out: what the platform itself feeds the RNG. (How much of
    the whole the noise is depends on the kernel: a tickless idle one ticks a few
    dozen times in the window, so a fixed noise would outweigh the ticks.)"""
    noise = noise_irq(sections)
    total = sum(n for (_, irq), n in samples_by_caller(sections).items() if irq != noise)
    return via_path(sections, mode) / total if total else 0.0


def current_clocksource(messages: list[tuple[float, str]]) -> str | None:
    """The clocksource the kernel last switched to (every switch is logged)."""
    found = None
    for _, text in messages:
        if "Switched to clocksource " in text:
            found = text.split("Switched to clocksource ", 1)[1].split()[0]
    return found
