"""Packed dumps on the data channel: no hypervisor needed.

The guest sends its kprobe trace gzip'd and base64'd (fixtures/init and the image's
collector, packed()); benchlib/boot/record.py puts the lines back. These run the guest's
own shell function on the host, with the busybox the initramfs is built from and
with bash for the image's collector, and parse what it printed.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from benchlib.core.paths import REPO
from benchlib.boot.record import PACKED_CORRUPT, ChannelCorrupt, parse_data

INIT, COLLECT = REPO / "fixtures" / "init", REPO / "fixtures" / "image" / "collect"
BUSYBOX = Path("/bin/busybox")      # fixtures/Makefile's BUSYBOX
TRACE_LINES = [f"          <idle>-0       [00{i % 2}] d.h..     {i / 1000:.6f}: air: "
               f"(add_interrupt_randomness+0x0/0xcd) irq={(i * 7) % 40}" for i in range(3000)]


def packed_function(script: Path, err_dir: Path) -> str:
    """The packed() shell function of a guest script, as written there, its
    stderr file (PACKED_ERR) in err_dir."""
    lines = script.read_text().splitlines()
    start = lines.index("packed() {")
    return (f"PACKED_ERR={err_dir}/packed.err\n"
            + "\n".join(lines[start:lines.index("}", start) + 1]) + "\n")


def run_packed(script: Path, shell: list[str], text: str, env: dict[str, str] | None = None,
               call: str = "packed", check: bool = True) -> subprocess.CompletedProcess:
    """The script's packed() run as `call` (text on its stdin), its stderr in stdout
    as a task's stderr is in the data channel."""
    with tempfile.TemporaryDirectory() as err_dir:
        return subprocess.run([*shell, "-c", packed_function(script, Path(err_dir)) + call
                               + " 2>&1"], input=text, capture_output=True, text=True,
                              env=env, check=check)


def channel(body: str) -> str:
    """A finished trace task as the data channel carries it."""
    return f"@@BEGIN trace\n@@SECTION trace\n{body}@@END trace rc=0\n"


def init_shell() -> list[str]:
    if not BUSYBOX.is_file():
        pytest.fail(f"{BUSYBOX} is missing: run scripts/setup.sh (busybox-static)")
    return [str(BUSYBOX), "sh"]


def shell_for(script: Path) -> list[str]:
    """The shell the script runs under in its guest: busybox sh, or the image's bash."""
    return init_shell() if script == INIT else ["bash"]


@pytest.mark.parametrize("script", [INIT, COLLECT], ids=["init", "collect"])
def test_packed_dump_unpacks_to_the_lines_sent(script: Path) -> None:
    shell = shell_for(script)
    text = "\n".join(TRACE_LINES) + "\n"
    sent = run_packed(script, shell, text).stdout
    assert sent.startswith("@@PACKED gzip base64\n") and sent.endswith("@@PACKED_END\n"), sent[:80]
    assert len(sent) < len(text) / 4, f"packed {len(text)} bytes into {len(sent)}"
    tasks, _ = parse_data(channel(sent))
    assert tasks["trace"].rc == 0
    assert tasks["trace"].sections()["trace"] == TRACE_LINES


@pytest.mark.parametrize("script", [INIT, COLLECT], ids=["init", "collect"])
def test_packed_dump_of_a_file_whose_size_is_not_its_length(script: Path) -> None:
    """The guests redirect the trace file (tracefs) to packed(): a file whose size
    is not what reading it gives, as /proc/cpuinfo here. GNU gzip (the image's)
    warns on stderr about such a file, and the task's stderr is the channel."""
    shell = shell_for(script)
    sent = run_packed(script, shell, "", call="packed < /proc/cpuinfo").stdout
    tasks, _ = parse_data(channel(sent))
    assert tasks["trace"].sections()["trace"] == Path("/proc/cpuinfo").read_text().splitlines()


def test_packed_dump_of_a_root_without_gzip_is_plain(tmp_path: Path) -> None:
    """An image team's root without gzip: the collector sends the trace as it is."""
    (tmp_path / "cat").symlink_to(shutil.which("cat") or "/bin/cat")
    sent = run_packed(COLLECT, [shutil.which("bash") or "/bin/bash"], "a\nb\n",
                      env={**os.environ, "PATH": str(tmp_path)}).stdout
    assert sent == "a\nb\n"
    assert parse_data(channel(sent))[0]["trace"].sections()["trace"] == ["a", "b"]


def packed_block() -> list[str]:
    return run_packed(INIT, init_shell(), "\n".join(TRACE_LINES) + "\n").stdout.splitlines()


@pytest.mark.parametrize("script", [INIT, COLLECT], ids=["init", "collect"])
def test_packed_dump_that_cannot_be_read_fails_its_task_and_says_why(script: Path) -> None:
    """A dump whose read fails (a directory here): packed() returns non-zero, so
    the task fails, and what cat said comes after the block, which still decodes."""
    shell = shell_for(script)
    done = run_packed(script, shell, "", call="packed < /", check=False)
    assert done.returncode != 0, done.stdout
    lines = done.stdout.splitlines()
    end = lines.index("@@PACKED_END")
    assert any("directory" in line.lower() for line in lines[end + 1:]), lines
    tasks, _ = parse_data(channel(done.stdout))
    assert tasks["trace"].sections()["trace"][-1] == lines[-1]


def test_packed_block_cut_off_by_the_channel_gives_what_decodes() -> None:
    """The guest died while sending: no end marker; the lines that decode are kept,
    the task never finished, and nothing raises."""
    block = packed_block()
    cut = "\n".join(block[:len(block) // 2]) + "\n"
    tasks, _ = parse_data(f"@@BEGIN trace\n@@SECTION trace\n{cut}")
    got = tasks["trace"].sections()["trace"]
    assert tasks["trace"].rc is None
    assert 0 < len(got) < len(TRACE_LINES) and got[:-1] == TRACE_LINES[:len(got) - 1]


def test_packed_block_that_ended_but_does_not_decode_is_an_error() -> None:
    block = packed_block()
    garbled = [block[0], "!!" + block[1][2:], *block[2:]]
    with pytest.raises(ChannelCorrupt, match=r"at line 3 of x/data.log does not decode"):
        parse_data(channel("\n".join(garbled) + "\n"), "x/data.log")
    short = [*block[:len(block) // 2], block[-1]]
    with pytest.raises(ChannelCorrupt, match="at line 3 of the data channel is not one whole"):
        parse_data(channel("\n".join(short) + "\n"))


def test_packed_block_that_does_not_decode_leaves_the_rest_readable_when_asked() -> None:
    """guest._judge and the clone check read leniently: the bad block is left out
    and its error collected (the boot fails on it), the other tasks still parse."""
    block = packed_block()
    garbled = "\n".join([block[0], "!!" + block[1][2:], *block[2:]]) + "\n"
    errors: list[str] = []
    tasks, _ = parse_data(channel(garbled) + "@@BEGIN kmsg\nrecord\n@@END kmsg rc=0\n",
                          "x/data.log", errors)
    assert len(errors) == 1 and "at line 3 of x/data.log does not decode" in errors[0]
    assert tasks["trace"].sections()["trace"] == [f"{PACKED_CORRUPT} {errors[0]}"]
    assert tasks["kmsg"].lines == ["record"]
