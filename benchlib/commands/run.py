"""The main job: build the kernels, boot the profile matrix, print and save the report.

  python3 -m benchlib.commands.run [--variant V ...] [--profile P ...] [--boots N] [--cap S]
                          [--accel auto|kvm|tcg] [--kernel PATH [--modules DIR]]
                          [--kernel-deb PKG.deb] [--no-build] [--dry-run] [--check-only]
                          [--profiles-dir DIR] [--list-profiles]
                          [--libvirt-uri URI ...] [--jobs-per-host N|auto] [--libvirt-pool NAME]
                          [--no-clones] [--no-throughput] [--no-entropy]
                          [--image NAME ...] [--list-images]
                          [--quiet | --progress text|json]

Writes results/<timestamp>/: report.txt, report.html, report.json, junit.xml and one folder
per boot with its domain XML, console log and data log. Exits 1 when a cell's
verdict is not ok (a boot or task failed, a boot gave no data, the median time to
ready is over the profile's budget, a clone check could not run) or a variant's
getrandom() throughput is over its budget; 2 on bad input. Whether a cell is
clone-safe is a finding, reported, not a verdict.

With --image, the run boots images instead (benchlib/commands/imagerun.py): a real Debian
userspace per recipe, on every kernel in every profile, a first boot and a second
one with its saved seed; the report says who waited for randomness and when.

Every argument is checked before anything is built or booted (benchlib/commands/options.py:
ranges, repeats dropped, relative paths resolved against the current directory).
--check-only stops there; --dry-run also prints the plan and its time estimate
(benchlib/commands/dryrun.py).

While it runs, it says what it does on stderr (benchlib/commands/progress.py): a line as each
boot starts and ends, the last with the boots done of those planned (the matrix's
and the throughput comparison's) and the time the rest will take (benchlib/commands/eta.py).
--progress=json gives each of these as a JSON object; --quiet none of them.
"""
from __future__ import annotations

import argparse
import atexit
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator, Optional

from ..core.cli import EXIT_INTERRUPTED, run_main
from ..core.defaults import CAP_S, PROBE_TIMEOUT_S
from ..core import paths
from ..boot.accel import resolve_accel
from ..core.errors import BadKernel, BenchError, NeedsKvm
from .eta import Eta
from ..boot.guest import choose_emulator, clear_stale, install_signal_handlers
from ..boot.hosts import AUTO, DEFAULT_URI, QUIET_WINDOW_S, HostPool, wait_until_quiet
from ..boot.libvirtconn import connect
from .matrix import (CLONES, ENTROPY_TASK, MATRIX, MATRIX_PROBE_FLAGS, MATRIX_TASKS,
                     THROUGHPUT, Boots, Settings, in_rounds, jobs_of, plan_matrix,
                     plan_throughput, preview)
from ..boot.remote import DEFAULT_POOL
from ..core.kernels import kernel_version, variant_kernel
from ..core.profiles import Profile, all_profiles, get_profile, use_directory
from .progress import QUIET, STYLES, TEXT, Progress
from ..report.report import (Cell, clone_unsafe, not_ok, not_ready, over_budget,
                             remove_if_empty, run_failed)
from ..report.forms import write
from ..report.report_json import run_meta
from ..core.userkernel import KernelUnderTest, user_kernel
from ..core.variants import CUSTOM, load as load_variant, known_variants
from ..report import budgets, entropy_plots, entropy_report, report_html
from . import clones, imagerun
from ..report import throughput
from . import dryrun, options


@contextmanager
def timed(phases: dict[str, float], name: str) -> Iterator[None]:
    """phases[name] = the wall time of the block, in seconds, however it ends."""
    started = time.monotonic()
    try:
        yield
    finally:
        phases[name] = round(time.monotonic() - started, 1)


def parse_args(argv: list[str], cwd: Optional[Path] = None) -> argparse.Namespace:
    """The arguments, checked (benchlib/commands/options.py): relative paths resolved
    against cwd (default: the current directory, make's: where make was called)."""
    parser = options.ArgumentParser(prog="bench", description=__doc__.splitlines()[0])
    parser.add_argument("--variant", action="append", default=[],
                        help="kernel variant(s) (default: every variant in kernel/patches, "
                             f"or only '{CUSTOM}' with --kernel or --kernel-deb); "
                             f"'{CUSTOM}' is the kernel of --kernel or --kernel-deb")
    options.add_shared(parser.add_argument, {
        "--kernel": f"boot this bzImage (as '{CUSTOM}'), alone unless --variant names others",
        "--modules": "the modules of --kernel's image (default /lib/modules/RELEASE)",
        "--kernel-deb": f"boot the kernel of this linux-image .deb (as '{CUSTOM}'), "
                        "unpacked, never installed, with its modules; alone unless "
                        "--variant names others",
        "--profile": "profile(s) (default: all)",
        "--boots": f"boots per cell (default {options.DEFAULT_BOOTS})",
        "--accel": "accelerator: a probe boot decides under auto (default auto)",
        "--libvirt-uri": "a libvirt host to boot on; repeat it to spread the matrix over "
                         f"several (default {DEFAULT_URI})",
        "--jobs-per-host": "boots at a time on each host, or auto: one guest booting at a "
                           "time and up to 2 per core waiting for their RNG beside it, as "
                           "the host's memory allows (default auto)",
        "--libvirt-pool": "storage pool that receives the kernels on hosts that do not "
                          f"share this machine's files (default {DEFAULT_POOL})",
        "--profiles-dir": "read the profiles from DIR instead of vm-definitions/ (the same "
                          "templating rules, checked at load)",
        "--reap": "destroy bench-* domains left running by a killed run",
    })
    parser.add_argument("--timeout", type=float, default=PROBE_TIMEOUT_S,
                        help="seconds the probe waits for the RNG in each boot "
                             f"(default {PROBE_TIMEOUT_S})")
    parser.add_argument("--cap", type=float, default=CAP_S,
                        help="seconds an idle guest may wait for its variant's final "
                             f"milestone (default {CAP_S})")
    parser.add_argument("--budget", type=Path, default=budgets.DEFAULT_FILE,
                        help="time-to-ready budgets per profile (default "
                             "vm-definitions/budgets.toml)")
    parser.add_argument("--no-budget", action="store_true", help="judge no time-to-ready budget")
    parser.add_argument("--no-entropy", action="store_true",
                        help="no interrupt time-stamp capture, no entropy table")
    parser.add_argument("--no-build", action="store_true", help="use the kernels as built")
    parser.add_argument("--no-throughput", action="store_true",
                        help="skip the getrandom() throughput comparison")
    parser.add_argument("--no-clones", action="store_true",
                        help="skip the clone check (one guest per cell saved past two minutes "
                             "and restored twice: the report's clone-safe column)")
    parser.add_argument("--dry-run", action="store_true",
                        help="check the arguments, print the plan (boots, cells, time "
                             "estimate) and stop: nothing is built or booted")
    parser.add_argument("--check-only", action="store_true",
                        help="check the arguments as --dry-run does and stop without a word "
                             "(make run does this before it builds)")
    parser.add_argument("--list-profiles", action="store_true",
                        help="list the profiles, whether each can run on this host and why "
                             "not, and stop")
    parser.add_argument("--image", action="append", default=[],
                        help="boot this image (vm-definitions/images/NAME.toml, or a recipe's "
                             "path) instead of the synthetic matrix: images × kernels × "
                             "profiles, a first and a second boot each (repeatable)")
    parser.add_argument("--list-images", action="store_true",
                        help="list the image recipes and whether their roots are built, and stop")
    said = parser.add_mutually_exclusive_group()
    said.add_argument("--quiet", action="store_true",
                      help="no progress lines: only errors, the report and its path")
    said.add_argument("--progress", choices=STYLES, default=TEXT,
                      help="progress on stderr as text lines, or as one JSON object a line "
                           "(benchlib/commands/progress.py; default text)")
    # The main job overlaps guests that only wait (the tests boot one at a time).
    parser.set_defaults(jobs_per_host=AUTO)
    args = parser.parse_args(argv)
    args.variant = chosen_variants(args)
    options.check(args, cwd or Path.cwd())
    return args


def chosen_variants(args: argparse.Namespace) -> list[str]:
    """The kernels a run boots, as --variant names them: every bench variant by
    default, or only the user's ('custom') when --kernel or --kernel-deb gives one;
    'custom' beside bench variants where --variant names both. BadKernel for a
    'custom' without a kernel of the user's."""
    users = bool(args.kernel or args.kernel_deb)
    if CUSTOM in args.variant and not users:
        raise BadKernel(f"--variant {CUSTOM} names the kernel of --kernel or --kernel-deb, "
                        "and neither was given")
    if not args.variant:
        return [CUSTOM] if users else known_variants()
    return args.variant if not users or CUSTOM in args.variant else [*args.variant, CUSTOM]


def progress_of(args: argparse.Namespace) -> Progress:
    """Where the run's progress goes, as --quiet and --progress say."""
    return Progress(QUIET if args.quiet else args.progress)


def listing_accel(args: argparse.Namespace) -> tuple[str, str]:
    """The accelerator guests would get here, for --list-profiles: as requested, or
    found by the KVM probe boot (about 20 s) when one can be made."""
    if args.accel != "auto":
        return args.accel, f"requested with --accel {args.accel}"
    if not os.path.exists("/dev/kvm"):
        return "tcg", "no /dev/kvm"
    outdir = paths.RESULTS_DIR / f"{time.strftime('%Y%m%d-%H%M%S')}-list-profiles"
    try:
        return resolve_accel("auto", connect((args.libvirt_uri or [DEFAULT_URI])[0]),
                             paths.initramfs(), outdir)
    except BenchError as exc:
        return "tcg", f"KVM could not be probed ({exc}): judged for TCG"


def list_profiles(profiles: list[Profile], accel: str, why: str) -> None:
    print(f"guests run under {accel.upper()} here ({why})")
    width = max(len(p.name) for p in profiles)
    for profile in profiles:
        try:
            emulator = choose_emulator(profile, accel)
            runs = f"yes  {emulator}"
        except NeedsKvm as exc:
            runs = f"no   {exc}"
        print(f"{profile.name:<{width}}  {runs}\n{'':<{width}}  {profile.description}")


def check_clones(cells: list[Cell], kernels: dict[str, Path],
                 users: Optional[KernelUnderTest], accel: str, conn: object,
                 outdir: Path, progress: Callable[[str], None]) -> None:
    """The clone-safe column: per cell that ran, one guest saved past two minutes of
    uptime and restored twice (benchlib/commands/clones.py), several at a time. A case that
    could not be run is a failure of its cell."""
    by_key = {f"{c.variant}/{c.profile}": c for c in cells if not c.skipped}
    cases = {}
    for key, cell in by_key.items():
        modular = users if users is not None and cell.variant == users.label else None
        cases[key] = clones.clone_case(get_profile(cell.profile), cell.variant,
                                       kernels[cell.variant], paths.initramfs(),
                                       outdir / "clones", accel, clones.LATE, users=modular)
    if not cases:
        return
    started = time.monotonic()
    at_once = clones.CONCURRENT_CASES
    progress(f"clone check: {len(cases)} cell(s), each one guest saved at "
             f"{clones.LATE_SAVE_UPTIME_S} s of uptime and restored twice, {at_once} at a time "
             f"(about {clones.CASE_WALL_S * -(-len(cases) // at_once) / 60:.0f} min)")
    finished = 0

    def done(key: str, result: object) -> None:
        nonlocal finished
        finished += 1
        said = result.verdict() if isinstance(result, clones.CloneOutcome) else f"failed: {result}"
        progress(f"[clone {finished}/{len(cases)}] {key}: {said} "
                 f"({time.monotonic() - started:.0f} s)")

    for key, result in clones.run_cases(conn, cases, clones.CONCURRENT_CASES, done).items():
        cell = by_key[key]
        if isinstance(result, clones.CloneOutcome):
            cell.clone_safe, cell.clone = result.verdict(), result.summary()
        else:
            cell.clone_safe = "failed"
            cell.failures.append(f"clone check: {result}")


def publish(outdir: Path, cells: list[Cell], meta: dict[str, object],
            bench_rows: list[dict[str, object]], entropy: bool) -> None:
    """The run's report in every form (report.txt printed, report.json, junit.xml,
    report.html), its plots and the entropy table, and where they are."""
    plots: list[Path] = []
    plot_notes: list[str] = []
    try:
        plots += report_html.milestone_plots(outdir, cells)
    except ImportError as exc:
        plot_notes.append(f"Milestone plots not made: {exc} (scripts/setup.sh installs "
                          "python3-matplotlib)")
    entropy_cells = None
    if entropy:
        captured = [r for c in cells for r in c.records if ENTROPY_TASK in r.tasks]
        entropy_cells = entropy_report.cells(captured)
        try:
            plots += entropy_plots.plot(captured, outdir)
        except ImportError as exc:
            plot_notes.append(f"Entropy plots not made: {exc} (scripts/setup.sh installs "
                              "python3-matplotlib)")
    if bench_rows:
        (outdir / "throughput.json").write_text(json.dumps(bench_rows, indent=2) + "\n")
    print(write(outdir, cells, meta, bench_rows, entropy_cells, plots, plot_notes))
    page = report_html.write(outdir, cells, meta, bench_rows, entropy_cells, plots, plot_notes)
    print(f"\nreport: {outdir}/report.txt, report.json, junit.xml, {page.name}; "
          f"boots: {outdir}/boots/")


def dry_run_domain(args: argparse.Namespace, profile: Profile, variant: str,
                   users: Optional[KernelUnderTest], budget_s: dict[str, float],
                   say: Progress) -> str:
    """One cell asked for: its first boot's command line and domain XML, as under
    --accel (TCG's under auto, which a probe decides at run time)."""
    accel = "tcg" if args.accel == "auto" else args.accel
    try:
        kernel = users.image if users is not None else variant_kernel(variant)
    except BenchError as exc:
        return f"domain of {profile.name} × {variant}: not shown: {exc}"
    settings = Settings(outdir=paths.RESULTS_DIR / "<start time>", accel=accel, boots=1,
                        cap_s=args.cap, timeout_s=args.timeout, entropy=not args.no_entropy,
                        budget_s=budget_s, users=users)
    return (f"(as under {accel.upper()})\n" if args.accel == "auto" else "") + \
        preview(settings, profile, variant, kernel, say)


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    say = progress_of(args)
    if args.profiles_dir:
        use_directory(args.profiles_dir)
    if args.list_profiles and not args.check_only:
        profiles = list(all_profiles().values())
        list_profiles(profiles, *listing_accel(args))
        return 0
    if args.list_images and not args.check_only:
        print(imagerun.list_images())
        return 0
    profiles = [get_profile(p) for p in args.profile] if args.profile \
        else list(all_profiles().values())
    # The bench's own variants; the user's kernel ('custom') comes with `users`.
    variants = [v for v in args.variant if v != CUSTOM]
    for variant in variants:
        load_variant(variant)       # an unknown or ill-described variant: say so now
    users: Optional[KernelUnderTest] = None
    if args.kernel or args.kernel_deb or args.modules:
        unpack_root = Path(tempfile.mkdtemp(prefix="bench-kernel-"))
        atexit.register(shutil.rmtree, unpack_root, True)
        users = user_kernel(args.kernel, args.modules, args.kernel_deb, unpack_root)
        say.message(f"kernel 'custom': {users.describe()}")
    budget_s = {} if args.no_budget else budgets.load(args.budget)
    if args.check_only:
        return 0
    if args.dry_run and args.image:
        labels = variants + ([users.label] if users is not None else [])
        print(imagerun.describe_plan(args.image, profiles, labels))
        return 0
    if args.dry_run:
        labels = variants + ([users.label] if users is not None else [])
        print(f"profiles: {' '.join(p.name for p in profiles)}; variants: {' '.join(labels)}")
        uris = list(dict.fromkeys(args.libvirt_uri or [DEFAULT_URI]))
        print(dryrun.describe(args, profiles, labels, uris, clones.CONCURRENT_CASES))
        if len(profiles) == 1 and len(labels) == 1:
            print(dry_run_domain(args, profiles[0], labels[0], users, budget_s, say))
        return 0
    if not args.no_build:
        for variant in variants:
            subprocess.run([str(paths.KERNEL_DIR / "build.sh"), variant], check=True)
        subprocess.run(["make", "-s", "-C", str(paths.FIXTURE_DIR),
                        f"OUT={paths.initramfs().parent}"], check=True)
    kernels = {v: variant_kernel(v) for v in variants}
    problem = paths.initramfs_problem()
    if problem:
        raise BenchError(problem)
    if users is not None:
        kernels[users.label] = users.image

    # The folder is made once the hosts answer: a run that cannot start leaves none.
    pool = HostPool(args.libvirt_uri, args.jobs_per_host, args.libvirt_pool)
    outdir = paths.RESULTS_DIR / time.strftime("%Y%m%d-%H%M%S")
    outdir.mkdir(parents=True, exist_ok=True)
    atexit.register(remove_if_empty, outdir)   # a run stopped before any boot leaves none
    conn = pool.first.conn
    install_signal_handlers()
    for line in clear_stale(pool.hosts, args.reap):
        say.message(line)
    if pool.slots > 1:
        say.message(f"{pool.slots} boot(s) at a time, one booting per host: " + ", ".join(
            f"{h.uri} ({h.jobs}: {h.jobs_why}; "
            f"{'local files' if h.shares_files else 'uploads and streams'})"
            for h in pool.hosts))
    # The boots done, planned and left, the throughput comparison's (one at a time) too.
    eta = Eta({MATRIX: pool.slots, THROUGHPUT: 1})
    # The boots, made on the pool's slots; boots.stop says why the run stopped early
    # (a signal), once it did: the report is still written.
    boots = Boots(pool, say, eta)
    stop = boots.stop
    # Each phase's wall time (s), in the order run: the report says where the time went.
    phases: dict[str, float] = {}

    try:
        accel, why = resolve_accel(args.accel, conn, paths.initramfs(), outdir)
        say.message(f"guests run under {accel.upper()} ({why})")
        if args.image:
            meta = {**run_meta(argv, []), "accel": accel, "accel_why": why,
                    "kernels": [{"variant": v, "image": str(k), "version": kernel_version(k)}
                                for v, k in kernels.items()]}
            return imagerun.run(args, profiles, kernels, users, conn, outdir, accel, meta)
        settings = Settings(outdir=outdir, accel=accel, boots=args.boots, cap_s=args.cap,
                            timeout_s=args.timeout, entropy=not args.no_entropy,
                            budget_s=budget_s, users=users)
        matrix = plan_matrix(settings, profiles, kernels, say)
        # The getrandom() comparison: every variant booted as often in each measure's
        # profile (benchlib/report/throughput.py), one boot at a time, round after round,
        # after the matrix and the clone check.
        bench = plan_throughput(settings, kernels, say) \
            if throughput.compares(list(kernels)) and not args.no_throughput else []
        matrix_jobs = jobs_of(matrix, MATRIX)
        bench_jobs = in_rounds(jobs_of(bench, THROUGHPUT))
        eta.expect(job.key for job in matrix_jobs + bench_jobs)
        with timed(phases, MATRIX):
            boots.run(matrix_jobs, pool.slots)
        cells = [cell for cell, _ in matrix]
        if not args.no_clones and not stop:
            try:
                with timed(phases, CLONES):
                    check_clones(cells, kernels, users, accel, conn, outdir, say.message)
            except KeyboardInterrupt as exc:
                stop.append(f"interrupted ({str(exc) or 'SIGINT'}) during the clone check")
        bench_rows: list[dict[str, object]] = []
        if bench and not stop:
            with timed(phases, THROUGHPUT):
                quiet, busy = wait_until_quiet(conn)
                say.message(f"throughput: the host is {'quiet' if quiet else 'still busy'} "
                            f"({busy:.2f} core(s) busy over {QUIET_WINDOW_S:g} s)")
                boots.run(bench_jobs, 1)
            if not stop:        # an interrupted comparison would judge part of a round
                bench_rows = [row for way in throughput.MEASURES for row in throughput.compare(
                    {c.variant: c.records for c, _ in bench if c.profile == way.profile}, way)]
            cells += [c for c, _ in bench if c.failures]
    finally:
        pool.close()
    # report.json's meta block (benchlib/report/report.schema.json): what any run says of
    # itself (command, git commit, host, date, QEMU versions), then this run's setup.
    meta = {**run_meta(argv, cells),
            "kernels": [{"variant": v, "image": str(k), "version": kernel_version(k)}
                        for v, k in kernels.items()],
            "accel": accel, "accel_why": why, "boots_per_cell": args.boots, "cap_s": args.cap,
            "hosts": [h.uri for h in pool.hosts], "jobs_per_host": args.jobs_per_host,
            "slots": [{"host": h.uri, "jobs": h.jobs, "why": h.jobs_why} for h in pool.hosts],
            "phases_s": phases,
            "budgets": {"file": None if args.no_budget else str(args.budget),
                        "ready": [{"profile": p, "ready_s": s} for p, s in budget_s.items()]},
            "workload": {"tasks": MATRIX_TASKS, "probe_flags": MATRIX_PROBE_FLAGS},
            "interrupted": stop[0] if stop else None}
    # The report's entropy assessment and plots take a while after a long run: an
    # interrupted run says what it still does, and a second signal leaves at once.
    finished = sum(len(cell.records) for cell in cells)
    say.message(f"writing the report of {finished} boot(s)" + (
        f" ({stop[0]}; interrupt again to leave without it)" if stop else ""))
    publish(outdir, cells, meta, bench_rows, entropy=not args.no_entropy)
    for cell in [*not_ready(cells), *clone_unsafe(cells)]:
        print(f"bench: finding: {cell.profile} × {cell.variant}: {cell.verdict()}", file=sys.stderr)
    for cell in not_ok(cells):
        print(f"bench: {cell.profile} × {cell.variant}: {cell.verdict()}", file=sys.stderr)
    for row in over_budget(bench_rows):
        print(f"bench: {row['variant']} getrandom() throughput ({row['threads']} threads, "
              f"{row['request_bytes']} B, {row['profile']}) is {row['ratio_to_stock']} of "
              f"stock's: {throughput.measure_of(row).failed}", file=sys.stderr)
    for row in throughput.unjudged(bench_rows):
        print(f"bench: {row['variant']} getrandom() throughput ({row['threads']} threads, "
              f"{row['request_bytes']} B, {row['profile']}) {throughput.judgement(row)}",
              file=sys.stderr)
    if stop:
        print(f"bench: {stop[0]}: the report holds the boots that finished", file=sys.stderr)
        return EXIT_INTERRUPTED
    return 1 if run_failed(cells, bench_rows) else 0


if __name__ == "__main__":
    run_main("bench", main)
