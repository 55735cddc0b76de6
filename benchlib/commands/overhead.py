"""What the harness costs per boot, against bare QEMU: a benchmark, not a test.

    make overhead [OVERHEAD_ARGS="--pairs 6 --profile tcg-quiet --variant stock"]

Each pair is one boot through the harness (guest.boot, a Guest: render, libvirt domain
created paused, channels wired, stages followed, logs parsed and judged) and one
boot of bare QEMU with the same kernel, initramfs, command line, machine, CPU,
memory and vCPUs (read back from the harness boot's own domain.xml), both serial
ports to files, until QEMU exits at the guest's power-off. The two run one after
the other, alternating which goes first, so that a slow spell of the host falls
on both. Host wall time of each; the ratio per pair, and their median and range.
The figures go to stdout and to results/overhead-<time>/overhead.json.
"""
from __future__ import annotations

import json
import statistics
import subprocess
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import libvirt

from . import options
from ..core import paths
from ..boot import plan
from ..core.cli import run_main
from ..core.defaults import PROBE_TIMEOUT_S
from ..core.errors import BenchError
from ..boot.guest import BootRequest, boot, install_signal_handlers
from ..core.kernels import variant_kernel
from ..boot.libvirtconn import connect
from ..core.profiles import get_profile

DEFAULT_PAIRS = 6
DEFAULT_PROFILE = "tcg-quiet"
DEFAULT_VARIANT = "stock"
# A bare boot that has not powered off by then is stuck: a failure, not a figure.
BARE_DEADLINE_S = PROBE_TIMEOUT_S + 120


def bare_command(domain_xml: Path, console: Path, data: Path) -> list[str]:
    """QEMU's command line for the boot a harness domain.xml describes, under TCG,
    without libvirt: the same kernel, initramfs, command line, machine, CPU model
    and features, memory and vCPUs; the serial ports to files."""
    root = ET.parse(domain_xml).getroot()
    os_el = root.find("os")
    assert os_el is not None
    machine = os_el.find("type").get("machine", "q35")     # type: ignore[union-attr]
    cpu = root.find("cpu")
    model = cpu.findtext("model", "qemu64") if cpu is not None else "qemu64"
    flags = "".join(f",{'-' if f.get('policy') == 'disable' else '+'}{f.get('name')}"
                    for f in (cpu.findall("feature") if cpu is not None else []))
    extra = [a.get("value", "") for a in root.iter("{http://libvirt.org/schemas/domain/qemu/1.0}arg")]
    machine_opts = ""
    if extra[:1] == ["-machine"] and len(extra) > 1:
        machine_opts, extra = "," + extra[1], extra[2:]
    return [str(paths.DEFAULT_EMULATOR), "-nodefaults", "-no-user-config", "-display", "none",
            "-machine", f"{machine},accel=tcg{machine_opts}", "-cpu", model + flags,
            "-m", root.findtext("memory", "512"), "-smp", root.findtext("vcpu", "1"),
            "-kernel", os_el.findtext("kernel", ""), "-initrd", os_el.findtext("initrd", ""),
            "-append", os_el.findtext("cmdline", ""), "-serial", f"file:{console}",
            "-serial", f"file:{data}", "-no-reboot", *extra]


def bare_boot(domain_xml: Path, outdir: Path) -> float:
    """Host wall seconds of one bare QEMU boot to its power-off."""
    outdir.mkdir(parents=True, exist_ok=True)
    command = bare_command(domain_xml, outdir / "console.log", outdir / "data.log")
    (outdir / "command").write_text(" ".join(command) + "\n")
    started = time.monotonic()
    try:
        subprocess.run(command, check=True, timeout=BARE_DEADLINE_S,
                       stdout=subprocess.DEVNULL, stderr=(outdir / "qemu.err").open("w"))
    except subprocess.TimeoutExpired:
        raise BenchError(f"bare QEMU did not power off within {BARE_DEADLINE_S} s "
                         f"({outdir})") from None
    wall = time.monotonic() - started
    if "@@BENCH stage=done" not in (outdir / "data.log").read_text(errors="replace"):
        raise BenchError(f"bare QEMU boot did not finish its tasks: {outdir / 'data.log'}")
    return wall


def harness_boot(conn: libvirt.virConnect, request: BootRequest) -> tuple[float, Path]:
    """Host wall seconds of one boot through the harness, and its domain.xml."""
    started = time.monotonic()
    record = boot(conn, request)
    return time.monotonic() - started, Path(record.console_log).parent / "domain.xml"


def main(argv: list[str]) -> int:
    parser = options.ArgumentParser(prog="overhead", description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=DEFAULT_PAIRS)
    parser.add_argument("--profile", default=DEFAULT_PROFILE)
    parser.add_argument("--variant", default=DEFAULT_VARIANT)
    args = parser.parse_args(argv)
    if args.pairs < 1:
        raise BenchError(f"--pairs {args.pairs}: at least one pair")
    profile = get_profile(args.profile)
    if profile.requires != "any":
        raise BenchError(f"profile '{profile.name}' needs '{profile.requires}': the bare "
                         "side runs Debian's QEMU under TCG, pick a profile that runs anywhere")
    kernel = variant_kernel(args.variant)
    initrd = paths.initramfs()
    if not initrd.is_file():
        raise BenchError(f"initramfs '{initrd}' is missing: run 'make fixtures'")
    out = paths.RESULTS_DIR / time.strftime("overhead-%Y%m%d-%H%M%S")
    install_signal_handlers()
    conn = connect("qemu:///system")
    pairs: list[dict] = []
    domain_xml = None
    for i in range(args.pairs):
        folder = out / f"pair{i + 1}"
        request = plan.request(profile, variant=args.variant, kernel=kernel, initrd=initrd,
                               outdir=folder)
        # The bare boot copies a harness boot's domain.xml: the first pair's harness
        # boot goes first; after that, the order alternates.
        if domain_xml is None or i % 2 == 0:
            h, domain_xml = harness_boot(conn, request)
            b = bare_boot(domain_xml, folder / "bare")
        else:
            b = bare_boot(domain_xml, folder / "bare")
            h, domain_xml = harness_boot(conn, request)
        pairs.append({"harness_s": round(h, 3), "bare_s": round(b, 3), "ratio": round(h / b, 3),
                      "harness_first": i % 2 == 0})
        print(f"pair {i + 1}/{args.pairs}: harness {h:.2f} s, bare QEMU {b:.2f} s, "
              f"{h / b:.2f}x", flush=True)
    ratios = [p["ratio"] for p in pairs]
    summary = {"profile": profile.name, "variant": args.variant, "pairs": pairs,
               "harness_median_s": statistics.median(p["harness_s"] for p in pairs),
               "bare_median_s": statistics.median(p["bare_s"] for p in pairs),
               "ratio_median": statistics.median(ratios),
               "ratio_min": min(ratios), "ratio_max": max(ratios)}
    (out / "overhead.json").write_text(json.dumps(summary, indent=2) + "\n")
    print(f"{profile.name}, {args.variant}, {len(pairs)} pairs: harness median "
          f"{summary['harness_median_s']:.2f} s, bare QEMU median {summary['bare_median_s']:.2f} s, "
          f"ratio median {summary['ratio_median']:.2f}x (pairs {min(ratios):.2f}-"
          f"{max(ratios):.2f}); {out / 'overhead.json'}")
    return 0


if __name__ == "__main__":
    run_main("overhead", main)
