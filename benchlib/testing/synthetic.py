"""Made-up boot records for the harness's own tests (no guest): one place, so that
every test that needs a throughput boot builds it the same way."""
from __future__ import annotations

import struct
from pathlib import Path

from ..checks import keyerase
from ..report import throughput
from ..core.bootrecord import BootRecord, TaskOutput


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


def keyerase_record(cases: dict[str, int], leaked: dict[str, int],
                    sigma: bool = True) -> BootRecord:
    """A boot whose task keyerase held each case's read (name -> length): in each,
    one key erasure before the fault, the stack snapshot, the next read's erasure.
    `leaked` names the cases whose snapshot keeps the erased key's last N bytes in
    the state's key words (as lrng 0008-0018 did); `sigma` False leaves the
    ChaCha20 constants off every snapshot (an observer that missed the state)."""
    record = BootRecord(name="bench-lrng-0", profile="tcg-virtio-rng", variant="lrng",
                        kernel="k", accel="tcg", cmdline="", console_log=Path("c"),
                        data_log=Path("d"))
    lines = ["# entries-in-buffer/entries-written: 0/0   #P:2"]
    t = 1.0

    def line(event: str, args: str) -> str:
        nonlocal t
        t += 0.001
        return f"        keyerase-42      [000] d.... {t:.6f}: {event}: (x+0x0/0x10) {args}"

    def key_args(key: bytes, counter: int) -> str:
        words = struct.unpack("<4Q", key)
        return " ".join(f"k{i}={w:#x}" for i, w in enumerate(words)) + f" ctr={counter:#x} nonce=0x0"

    for n, (name, length) in enumerate(cases.items()):
        old_key = bytes(range(n * 32 + 1, n * 32 + 33))
        new_key = keyerase.chacha20_block(old_key)[:32]
        state = bytearray(keyerase.CHACHA_SIGMA if sigma else bytes(16))
        kept = leaked.get(name, 0)
        state += bytes(32 - kept) + old_key[32 - kept:] + struct.pack("<4I", 1, 0, 0, 0)
        stack = bytes(512) + bytes(state) + bytes(keyerase.STACK_EVENTS
                                                  * keyerase.STACK_WORDS_PER_EVENT * 8
                                                  - 512 - len(state))
        words = struct.unpack(f"<{len(stack) // 8}Q", stack)
        lines.append(f"        keyerase-42      [000] ..... {t:.6f}: tracing_mark_write: "
                     f"keyerase=begin case={name}")
        lines.append(line(keyerase.KEY_EVENT, key_args(old_key, 0)))
        for e, event in enumerate(keyerase.STACK_EVENT_NAMES):
            chunk = words[e * keyerase.STACK_WORDS_PER_EVENT:(e + 1) * keyerase.STACK_WORDS_PER_EVENT]
            lines.append(line(event, " ".join(f"w{i}={w:#x}" for i, w in enumerate(chunk))))
        lines.append(line(keyerase.KEY_EVENT, key_args(new_key, 0)))
        lines.append(f"        keyerase-42      [000] ..... {t + 0.001:.6f}: tracing_mark_write: "
                     f"keyerase=end case={name}")
        t += 0.01
        record.probe.append({"event": "keyerase", "case": name, "len": str(length),
                             "got": str(length), "held": "yes", "handler": "ok"})
    total = sum(1 for entry in lines if ": " in entry)
    lines[0] = f"# entries-in-buffer/entries-written: {total}/{total}   #P:2"
    names = (keyerase.KEY_EVENT, *keyerase.STACK_EVENT_NAMES)
    task = TaskOutput(keyerase.TASK, 0, [
        "@@SECTION kprobe_events", *(f"p:kprobes/{n} f" for n in names),
        "@@SECTION kprobe_profile", *(f"  {n}  5  0" for n in names),
        "@@SECTION trace", *lines])
    record.tasks = {keyerase.TASK: task}
    return record
