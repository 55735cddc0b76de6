"""The main job: build the kernels, boot the profile matrix, print and save the report.

  python3 -m benchlib.run [--variant V ...] [--profile P ...] [--boots N]
                          [--accel auto|kvm|tcg] [--kernel PATH] [--no-build] [--dry-run]

Writes results/<timestamp>/: report.txt, report.json, junit.xml and one folder
per boot with its domain XML, console log and data log.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

import libvirt

from . import paths
from .accel import resolve_accel
from .errors import BenchError, NeedsKvm
from .guest import BootRequest, boot, check_accel
from .kernels import check_bzimage, variant_kernel
from .profiles import Profile, all_profiles, get_profile
from .report import Cell, write
from . import throughput

# The workload of a matrix boot: the probe with a blocking reader, as an early
# boot with one process waiting for randomness would have, then a few seconds
# more so that milestones just after readiness (a reseed) are seen too.
MATRIX_TASKS = ["probe", "settle"]
MATRIX_PROBE_FLAGS = "b"


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="bench", description=__doc__.splitlines()[0])
    parser.add_argument("--variant", action="append", default=[],
                        help="kernel variant(s) (default: every variant in kernel/patches)")
    parser.add_argument("--kernel", type=Path, help="also boot this bzImage (as 'custom')")
    parser.add_argument("--profile", action="append", default=[], help="profile(s) (default: all)")
    parser.add_argument("--boots", type=int, default=3, help="boots per cell (default 3)")
    parser.add_argument("--accel", choices=("auto", "kvm", "tcg"), default="auto")
    parser.add_argument("--libvirt-uri", default="qemu:///system")
    parser.add_argument("--timeout", type=float, default=60,
                        help="seconds the probe waits for the RNG in each boot (default 60)")
    parser.add_argument("--no-build", action="store_true", help="use the kernels as built")
    parser.add_argument("--no-throughput", action="store_true",
                        help="skip the getrandom() throughput comparison")
    parser.add_argument("--dry-run", action="store_true", help="check the arguments and stop")
    return parser.parse_args(argv)


def progress(message: str) -> None:
    print(f"==> [run] {message}", file=sys.stderr, flush=True)


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    profiles = [get_profile(p) for p in args.profile] if args.profile \
        else list(all_profiles().values())
    variants = args.variant or paths.known_variants()
    if args.dry_run:
        print(f"profiles: {' '.join(p.name for p in profiles)}; variants: {' '.join(variants)}")
        return 0
    if not args.no_build:
        for variant in variants:
            subprocess.run([str(paths.KERNEL_DIR / "build.sh"), variant], check=True)
        subprocess.run(["make", "-s", "-C", str(paths.FIXTURE_DIR)], check=True)
    kernels = {v: variant_kernel(v) for v in variants}
    if args.kernel:
        kernels["custom"] = check_bzimage(args.kernel)

    outdir = paths.RESULTS_DIR / time.strftime("%Y%m%d-%H%M%S")
    outdir.mkdir(parents=True, exist_ok=True)
    conn = libvirt.open(args.libvirt_uri)
    try:
        accel, why = resolve_accel(args.accel, conn, next(iter(kernels.values())),
                                   paths.initramfs(), outdir)
        progress(f"guests run under {accel.upper()} ({why})")
        def boot_cell(profile: Profile, variant: str, kernel: Path, tasks: list[str],
                      params: dict[str, str], boots: int = args.boots) -> Cell:
            cell = Cell(profile.name, variant)
            try:
                check_accel(profile, accel)
            except NeedsKvm as exc:
                cell.skipped = str(exc)
                progress(f"{profile.name} × {variant}: skipped: {exc}")
                return cell
            for n in range(1, boots + 1):
                progress(f"{profile.name} × {variant}: {','.join(tasks)} boot {n}/{boots}")
                request = BootRequest(profile=profile, variant=variant, kernel=kernel,
                                      initrd=paths.initramfs(), outdir=outdir / "boots",
                                      accel=accel, tasks=tasks, params=params,
                                      timeout_s=args.timeout)
                try:
                    cell.records.append(boot(conn, request))
                except BenchError as exc:
                    cell.failures.append(str(exc))
                    progress(f"boot failed: {exc}")
            return cell

        cells = [boot_cell(profile, variant, kernel, MATRIX_TASKS,
                           {"probe": MATRIX_PROBE_FLAGS})
                 for profile in profiles for variant, kernel in kernels.items()]
        bench_rows: list[dict[str, object]] = []
        if len(kernels) > 1 and not args.no_throughput:
            # One boot per variant in turn, so that a change in host load over the
            # run falls on every variant alike.
            bench = {v: Cell(throughput.PROFILE, v) for v in kernels}
            for _ in range(args.boots):
                for variant, kernel in kernels.items():
                    one = boot_cell(get_profile(throughput.PROFILE), variant, kernel,
                                    throughput.TASKS, {}, boots=1)
                    bench[variant].records += one.records
                    bench[variant].failures += one.failures
                    bench[variant].skipped = one.skipped
            bench_rows = throughput.compare({v: c.records for v, c in bench.items()})
            cells += [c for c in bench.values() if c.failures]
    finally:
        conn.close()
    meta = {"accel": accel, "accel_why": why, "boots": args.boots,
            "workload": f"tasks={','.join(MATRIX_TASKS)} probe={MATRIX_PROBE_FLAGS}",
            "kernels": {v: str(k) for v, k in kernels.items()}}
    print(write(outdir, cells, meta))
    if bench_rows:
        text = throughput.table(bench_rows)
        print("\n" + text)
        with (outdir / "report.txt").open("a") as report_txt:
            report_txt.write("\n" + text + "\n")
        (outdir / "throughput.json").write_text(json.dumps(bench_rows, indent=2) + "\n")
    print(f"\nreport: {outdir}/report.txt, report.json, junit.xml; boots: {outdir}/boots/")
    failed = sum(len(c.failures) for c in cells)
    return 1 if failed else 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except BenchError as exc:
        print(f"bench: {exc}", file=sys.stderr)
        sys.exit(2)
    except subprocess.CalledProcessError as exc:
        print(f"bench: '{' '.join(exc.cmd)}' failed with exit code {exc.returncode}",
              file=sys.stderr)
        sys.exit(2)
