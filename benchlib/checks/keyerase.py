"""Forward secrecy of a held read, judged from the trace (task "keyerase").

The guest (fixtures/keyerase.c) reads the RNG into a page only userfaultfd can
fill, so the kernel's copy to user space faults and the reader sleeps in
handle_userfault() for as long as user space likes. Two kprobe sets, filtered to
the reader, are the evidence: every ChaCha20 block the reader's calls make (the
state's key, counter and nonce words: a block with counter and nonce 0 is a key
erasure, and its key one the CPU held), and the reader's whole kernel stack at
handle_userfault()'s entry.

A key the CPU held, found on the stack of a reader that sleeps in its copy, is a
forward-secrecy break: block 0 under it is the CPU's next key (fast key erasure),
so whoever reads that stack has the CPU's key and its output until the next
rekey. 6.1's get_random_bytes_user() overwrites its state's key words before the
first copy for that reason. The check looks for every 8-byte quarter of every key
erased during the read, at any offset: a read that keeps part of a key keeps that
part's share of the work an attacker is spared.

Nothing is taken from the kernel's own account: an observation that could not
have seen a leak (a snapshot event missing, hits missed, no ChaCha20 state on the
snapshot, a read never held) makes the case undecided, which fails.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Optional

from . import trace
from ..core.bootrecord import BootRecord

TASK = "keyerase"
KEY_EVENT = "keyerase_key"
# fixtures/keyerase.c: 16 snapshot events of 128 stack words (a 16 KiB THREAD_SIZE).
STACK_EVENTS = 16
STACK_WORDS_PER_EVENT = 128
STACK_EVENT_NAMES = tuple(f"keyerase_stack{i:02d}" for i in range(STACK_EVENTS))
MARKER = trace.MARKER_EVENT
# A key is looked for a quarter at a time (8 bytes: one kprobe word): a read that
# overwrote only part of its key words still exposes the rest.
KEY_PART = 8
KEY_SIZE = 32
# ChaCha20's constant words, "expand 32-byte k": words 0..3 of every state. A
# snapshot without them did not reach the reader's state, and proves nothing.
CHACHA_SIGMA = b"expand 32-byte k"


# ---- ChaCha20's block function (RFC 7539 layout, the kernel's chacha_block_generic) ----

def _rotl(v: int, n: int) -> int:
    return ((v << n) & 0xFFFFFFFF) | (v >> (32 - n))


def _quarter(x: list[int], a: int, b: int, c: int, d: int) -> None:
    x[a] = (x[a] + x[b]) & 0xFFFFFFFF; x[d] = _rotl(x[d] ^ x[a], 16)
    x[c] = (x[c] + x[d]) & 0xFFFFFFFF; x[b] = _rotl(x[b] ^ x[c], 12)
    x[a] = (x[a] + x[b]) & 0xFFFFFFFF; x[d] = _rotl(x[d] ^ x[a], 8)
    x[c] = (x[c] + x[d]) & 0xFFFFFFFF; x[b] = _rotl(x[b] ^ x[c], 7)


def chacha20_block(key: bytes, counter: int = 0, nonce: int = 0) -> bytes:
    """One 64-byte ChaCha20 block: words 12-13 the counter, 14-15 the nonce, as
    the kernel's state is laid out (crypto/chacha.h)."""
    state = [*struct.unpack("<4I", CHACHA_SIGMA), *struct.unpack("<8I", key),
             counter & 0xFFFFFFFF, counter >> 32, nonce & 0xFFFFFFFF, nonce >> 32]
    x = list(state)
    for _ in range(10):
        _quarter(x, 0, 4, 8, 12); _quarter(x, 1, 5, 9, 13)
        _quarter(x, 2, 6, 10, 14); _quarter(x, 3, 7, 11, 15)
        _quarter(x, 0, 5, 10, 15); _quarter(x, 1, 6, 11, 12)
        _quarter(x, 2, 7, 8, 13); _quarter(x, 3, 4, 9, 14)
    return struct.pack("<16I", *((a + b) & 0xFFFFFFFF for a, b in zip(x, state)))


# ---- One held read ---------------------------------------------------------------------

@dataclass(frozen=True)
class HeldRead:
    case: str
    length: int
    erased_keys: tuple[bytes, ...]    # keys the CPU held, erased before the copy faulted
    stack: bytes                      # the reader's kernel stack while its copy was held
    next_key: Optional[bytes]         # the key of the CPU's next erasure (the read after)

    def exposed(self) -> list[tuple[int, int, int]]:
        """(key index, byte offset in the key, offset on the stack) for each key
        quarter found on the stack."""
        found = []
        for k, key in enumerate(self.erased_keys):
            for part in range(0, KEY_SIZE, KEY_PART):
                at = self.stack.find(key[part:part + KEY_PART])
                if at >= 0:
                    found.append((k, part, at))
        return found

    def derives_next_key(self, key: bytes) -> bool:
        """Block 0 under `key` is the key the CPU held next (what a thief computes)."""
        return self.next_key is not None and chacha20_block(key)[:KEY_SIZE] == self.next_key

    def leak(self) -> Optional[str]:
        """A sentence naming what the stack kept, or None."""
        found = self.exposed()
        if not found:
            return None
        k = found[0][0]
        parts = sorted({part for key, part, _ in found if key == k})
        where = ", ".join(f"bytes {p}-{p + KEY_PART - 1} at stack offset {at:#x}"
                          for key, p, at in found if key == k)
        key = self.erased_keys[k]
        whole = len(parts) * KEY_PART == KEY_SIZE
        consequence = ""
        if whole:
            consequence = ("; block 0 under it is the CPU's next key, as the trace shows"
                           if self.derives_next_key(key) else
                           "; it is the input of the block that made the CPU's next key")
        return (f"{self.case} ({self.length} bytes): the reader's kernel stack held "
                f"{len(parts) * KEY_PART} of the 32 bytes of a key the CPU held ({where}) "
                f"while its copy to user space slept{consequence}")


def _key_of(event: trace.TraceEvent) -> bytes:
    return b"".join(struct.pack("<Q", event.int(f"k{i}")) for i in range(4))


def _stack_of(snapshot: dict[str, trace.TraceEvent]) -> bytes:
    words = []
    for name in STACK_EVENT_NAMES:
        event = snapshot[name]
        words += [event.int(f"w{i}") for i in range(STACK_WORDS_PER_EVENT)]
    return struct.pack(f"<{len(words)}Q", *words)


def _framed(events: list[trace.TraceEvent], case: str) -> list[trace.TraceEvent]:
    """The events between the case's begin and end markers."""
    inside, start = [], None
    for event in events:
        if event.event == MARKER and event.args.get("case") == case:
            if event.args.get("keyerase") == "begin":
                start = True
            elif event.args.get("keyerase") == "end" and start:
                return inside
        elif start:
            inside.append(event)
    raise trace.TraceIncomplete(f"case {case}: no begin and end markers in the trace")


def held_read(events: list[trace.TraceEvent], case: str, length: int) -> HeldRead:
    """One case's evidence; TraceIncomplete when the snapshot is not whole."""
    inside = _framed(events, case)
    snapshot: dict[str, trace.TraceEvent] = {}
    for event in inside:
        if event.event in STACK_EVENT_NAMES and event.event not in snapshot:
            snapshot[event.event] = event
    missing = [n for n in STACK_EVENT_NAMES if n not in snapshot]
    if missing:
        raise trace.TraceIncomplete(f"case {case}: no stack snapshot events {missing} "
                                    "(the read never slept in handle_userfault?)")
    held_at = min(e.t for e in snapshot.values())
    erasures = [e for e in inside if e.event == KEY_EVENT
                and e.int("ctr") == 0 and e.int("nonce") == 0]
    before = tuple(_key_of(e) for e in erasures if e.t <= held_at)
    after = [_key_of(e) for e in erasures if e.t > held_at]
    return HeldRead(case, length, before, _stack_of(snapshot), after[0] if after else None)


def held_reads(record: BootRecord) -> list[HeldRead]:
    """Every case the guest ran, judged observable; AssertionError (naming the case
    and the data log) where the observation could not have seen a leak."""
    task = record.finished_task(TASK)
    sections = task.sections()
    blind = trace.blind_spots(sections, (KEY_EVENT, *STACK_EVENT_NAMES))
    assert not blind, (f"keyerase: the kprobes could not see every event: {'; '.join(blind)} "
                       f"({record.data_log})")
    events = trace.trace_of(sections)
    cases = record.probe_events(TASK)
    assert cases, f"keyerase: the guest reported no case ({record.data_log})"
    reads = []
    for case in cases:
        name = case["case"]
        assert case.get("held") == "yes" and case.get("handler") == "ok", (
            f"keyerase: case {name}: the read was never held in its copy to user space "
            f"(held={case.get('held')}, handler={case.get('handler')}): nothing could be "
            f"seen ({record.data_log})")
        assert case.get("got") == case.get("len"), (
            f"keyerase: case {name}: the read returned {case.get('got')} of "
            f"{case.get('len')} bytes ({record.data_log})")
        try:
            read = held_read(events, name, int(case["len"]))
        except trace.TraceIncomplete as e:
            raise AssertionError(f"keyerase: {e} ({record.data_log})") from e
        assert read.erased_keys, (
            f"keyerase: case {name}: no key erasure before the copy faulted: the trace "
            f"did not see where the read's key came from ({record.data_log})")
        assert CHACHA_SIGMA in read.stack, (
            f"keyerase: case {name}: no ChaCha20 state on the {len(read.stack)}-byte "
            f"snapshot of the reader's stack: it did not reach the reader's frame "
            f"({record.data_log})")
        reads.append(read)
    return reads


def leaks(record: BootRecord) -> list[str]:
    """One sentence per case whose held read kept a key on its stack."""
    return [leak for read in held_reads(record) if (leak := read.leak())]
