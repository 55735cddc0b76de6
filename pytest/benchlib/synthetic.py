"""Made-up boot records for the harness's own tests (no guest): one place, so that
every test that needs a throughput boot builds it the same way."""
from __future__ import annotations

from pathlib import Path

from . import throughput
from .record import BootRecord, TaskOutput


# The interrupt event as task trace lists it among the armed kprobes
# (fixtures/trace-*), for synthetic boots whose interrupt count must be whole.
ARMED_AIR = "p:kprobes/air add_interrupt_randomness irq=$arg1:s32"

def throughput_records(variant: str, mb_s: list[float], threads: int = 1,
                       profile: str = throughput.PROFILE) -> list[BootRecord]:
    """One boot per figure, each with one grbench case of `threads` threads × 4 KiB."""
    records = []
    for i, rate in enumerate(mb_s):
        record = BootRecord(name=f"bench-{variant}-{i}", profile=profile,
                            variant=variant, kernel="k", accel="tcg", cmdline="",
                            console_log=Path("c"), data_log=Path("d"))
        record.probe = [{"event": "throughput", "threads": str(threads), "size": "4096",
                         "bytes": str(int(rate * 1e6)), "seconds": "1.0"}]
        records.append(record)
    return records


def lrngnoderead_record(generated: list[tuple[int, int]]) -> BootRecord:
    """A boot whose task lrngnoderead read on one CPU per node, CPU n on node n:
    `generated` gives, per CPU, its node's DRBG (generate calls, bytes) during
    the read."""
    record = BootRecord(name="bench-lrng-0", profile="tcg-numa", variant="lrng", kernel="k",
                        accel="tcg", cmdline="", console_log=Path("c"), data_log=Path("d"))
    task = TaskOutput("lrngnoderead", 0)

    def state(cpu: int, calls: int, done: int) -> list[str]:
        nodes = [f"node{n}: fully_seeded=1 requests_left=4000 generate_calls="
                 f"{calls if n == cpu else 7} generated_bytes={done if n == cpu else 224} "
                 f"reseeds=1 last_seeded_secs_ago=1" for n in range(len(generated))]
        return ["ready: 1", *nodes, f"cpu{cpu}: node={cpu} last_served_by_node={cpu}"]

    for cpu, (calls, done) in enumerate(generated):
        task.lines += [f"@@SECTION before cpu{cpu}", *state(cpu, 10, 1000),
                       f"@@SECTION after cpu{cpu}", *state(cpu, 10 + calls, 1000 + done)]
    record.tasks = {"lrngnoderead": task}
    return record
