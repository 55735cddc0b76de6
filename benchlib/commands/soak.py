"""Soak: boot every TCG profile with the stock and crng variants many times and
report the flake rate, i.e. boots that failed for any reason but the kernel.

  python3 -m benchlib.commands.soak [--boots N] [--variant V ...] [--profile P ...]
                           [--libvirt-uri URI] [--check-only]

The arguments are checked as the main job's are (benchlib/commands/options.py), and every
variant's kernel must be built before the first boot.

A boot fails "by the kernel" when the console showed a death string (panic, BUG,
Oops); any other failure (a stage that never came, a guest that ended early, a
kernel log dump with a gap, a task that failed) is the bench's, a flake. The
target is 0. Exits 1 when any flake was seen.
"""
from __future__ import annotations

import time
from collections import Counter
from pathlib import Path

from ..core.cli import run_main
from ..checks import measure
from . import options
from ..core import paths
from ..boot import plan
from ..boot.stages import DEATH
from ..core.errors import BenchError, BootFailed
from ..boot.guest import boot, install_signal_handlers
from ..boot.hosts import DEFAULT_URI
from ..boot.libvirtconn import connect
from ..core.profiles import get_profile, profiles_with

DEFAULT_BOOTS = 20
DEFAULT_VARIANTS = ["stock", "crng"]


def by_kernel(error: BenchError) -> bool:
    return isinstance(error, BootFailed) and DEATH.search(str(error)) is not None


def main(argv: list[str]) -> int:
    parser = options.ArgumentParser(prog="soak", description=__doc__.splitlines()[0])
    parser.add_argument("--boots", type=int, default=DEFAULT_BOOTS)
    parser.add_argument("--variant", action="append", default=[])
    options.add_shared(parser.add_argument, {
        "--profile": "profile(s) (default: every profile without Hyper-V)",
        "--libvirt-uri": f"the libvirt host to boot on (default {DEFAULT_URI})"})
    parser.add_argument("--check-only", action="store_true",
                        help="check the arguments and stop (make soak does this before it "
                             "builds; the variants need not be built yet)")
    args = parser.parse_args(argv)
    args.variant = args.variant or DEFAULT_VARIANTS
    # Every argument, and every variant's kernel built, before the first boot.
    options.check(args, Path.cwd(), built=not args.check_only)
    if args.check_only:
        return 0
    profiles = args.profile or profiles_with(hyperv=False)
    variants = args.variant
    outdir = paths.RESULTS_DIR / f"soak-{time.strftime('%Y%m%d-%H%M%S')}"
    conn = connect((args.libvirt_uri or [DEFAULT_URI])[0])
    install_signal_handlers()
    outcomes: Counter[tuple[str, str, str]] = Counter()
    flakes: list[str] = []
    total = len(profiles) * len(variants) * args.boots
    n = 0
    for profile in profiles:
        for variant in variants:
            for _ in range(args.boots):
                n += 1
                request = plan.request(get_profile(profile), variant=variant, outdir=outdir,
                                       params={"probe": "bi"})
                try:
                    record = boot(conn, request)
                    failed = measure.failed_tasks(record)
                    outcome = f"task failed: {', '.join(failed)}" if failed else "ok"
                except BenchError as exc:
                    outcome = "kernel" if by_kernel(exc) else f"flake: {exc}"
                if outcome.startswith(("flake", "task failed")):
                    flakes.append(f"{profile} × {variant}: {outcome}")
                outcomes[(profile, variant, outcome.split(":")[0])] += 1
                print(f"==> [soak] {n}/{total} {profile} × {variant}: {outcome}", flush=True)
    conn.close()
    lines = [f"soak: {total} boots, {len(flakes)} flakes "
             f"({len(flakes) / total:.1%}); boots in {outdir}"]
    lines += [f"  {p} × {v}: {o} {c}" for (p, v, o), c in sorted(outcomes.items())]
    lines += [f"  flake: {f}" for f in flakes]
    text = "\n".join(lines)
    outdir.mkdir(parents=True, exist_ok=True)
    (outdir / "soak.txt").write_text(text + "\n")
    print(text)
    return 1 if flakes else 0


if __name__ == "__main__":
    run_main("soak", main)
