"""What the VMBus tests read from a `vmbus` task: who fed the RNG, from where."""
from __future__ import annotations

from .credit import parse_hist
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
    for keys, hits in parse_hist(sections["hist air"]):
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
    return sum(n for _, n in parse_hist(sections["hist visr"]))


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
