"""Forward secrecy of a read held in its copy to user space, for every variant.

A getrandom() or /dev/urandom read whose copy to user space faults can sleep for
as long as user space likes (here: a page only userfaultfd fills). Its kernel
stack must not keep a key the CPU held meanwhile: block 0 under that key is the
CPU's next key. 6.1 overwrites its state's key words before the first copy; the
guest (fixtures/keyerase.c) takes the reader's stack with kprobes while it
sleeps, and benchlib/checks/keyerase.py looks on it for every key the trace saw erased.

test-lrng-keyleak is the negative control: the lrng series without its key
erasure before the copy (the code of lrng 0008-0018), which must be seen leaking.
"""
from __future__ import annotations

import pytest

from benchlib.checks import keyerase
from benchlib.testing import synthetic

# Ready at once in every variant: nothing blocks, the read is served by the
# generator in its steady state.
PROFILE = "tcg-virtio-rng"
LEAKY = "test-lrng-keyleak"
CASES = {"getrandom_16": 16, "getrandom_32": 32, "getrandom_4096": 4096,
         "urandom_16": 16, "urandom_4096": 4096}
# What the leaky kernel keeps of its key: all of it past 32 bytes, the 16 bytes a
# 16-byte read leaves unwritten, nothing for exactly 32 (every key word rewritten).
LEAKY_CASES = {"getrandom_16", "getrandom_4096", "urandom_16", "urandom_4096"}


def held(boot_guest, variant: str):
    return boot_guest(PROFILE, tasks=["keyerase"], variant=variant)


def test_key_erasure_held_read_keeps_no_key_on_the_stack(boot_guest, variant: str) -> None:
    record = held(boot_guest, variant)
    found = keyerase.leaks(record)
    assert not found, f"{variant}: " + "; ".join(found) + f" ({record.data_log})"


def test_key_erasure_negative_control_keyleak_is_seen(boot_guest, bench_variant) -> None:
    record = held(boot_guest, bench_variant(LEAKY))
    found = {read.case for read in keyerase.held_reads(record) if read.leak()}
    assert found == LEAKY_CASES, (
        f"{LEAKY} keeps the key on the stack in {sorted(LEAKY_CASES)}; the check saw "
        f"it in {sorted(found)} ({record.data_log})")


# ---- The check itself, on made-up traces ---------------------------------------------

def test_key_erasure_harness_leak_found_by_the_part_kept() -> None:
    record = synthetic.keyerase_record(CASES, leaked={"getrandom_16": 16, "urandom_4096": 32})
    found = keyerase.leaks(record)
    assert len(found) == 2, found
    assert found[0].startswith("getrandom_16 (16 bytes): the reader's kernel stack held 16 of")
    assert "block 0 under it is the CPU's next key" in found[1]


def test_key_erasure_harness_clean_stack_passes() -> None:
    assert keyerase.leaks(synthetic.keyerase_record(CASES, leaked={})) == []


def test_key_erasure_harness_snapshot_without_state_is_undecided() -> None:
    record = synthetic.keyerase_record(CASES, leaked={}, sigma=False)
    with pytest.raises(AssertionError, match="no ChaCha20 state on the"):
        keyerase.leaks(record)


def test_key_erasure_harness_missed_hits_are_undecided() -> None:
    record = synthetic.keyerase_record(CASES, leaked={})
    task = record.tasks[keyerase.TASK]
    task.lines = [line.replace("keyerase_stack03  5  0", "keyerase_stack03  5  1")
                  for line in task.lines]
    with pytest.raises(AssertionError, match="'keyerase_stack03' missed 1 hits"):
        keyerase.leaks(record)


def test_key_erasure_harness_read_never_held_is_undecided() -> None:
    record = synthetic.keyerase_record(CASES, leaked={})
    record.probe[0]["held"] = "no"
    with pytest.raises(AssertionError, match="never held"):
        keyerase.leaks(record)


def test_key_erasure_chacha20_block_matches_rfc7539() -> None:
    # RFC 7539 2.3.2's test vector: key 00..1f, counter 1, nonce 000000090000004a00000000.
    key = bytes(range(32))
    state_nonce = int.from_bytes(bytes.fromhex("0000004a00000000"), "little")
    # The kernel's layout puts words 13-15 after the counter word; RFC's block has a
    # 32-bit counter and a 96-bit nonce: words 13 = 0x09000000.
    block = keyerase.chacha20_block(key, counter=1 | (0x09000000 << 32), nonce=state_nonce)
    assert block[:16].hex() == "10f1e7e4d13b5915500fdd1fa32071c4"
