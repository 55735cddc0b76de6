"""What the host must know of an init task beyond its name: one description each.

The init (fixtures/init) runs tasks by name. Most need nothing of the host but
their place in bench.tasks; the few below change how a boot is made or shared:

  cap       the task runs up to a cap of its own (bench.<cap>, the init's default
            in defaults.GUEST_PARAMS) rather than the probe's timeout: its stage
            deadline is that cap plus guest.TASK_SLACK_S.
  cmdline   kernel command-line words a boot that runs the task needs.
  options   kernel options the task needs (a user's kernel without them is a skip
            naming them: benchlib/core/kconfig.py).
  settles   from the task's start the guest only waits: the next guest of its host
            may boot beside it (hosts.Lease.booting).
  exclusive the task measures its own interrupts' timing: on a shared host the
            guest is paused as the task begins and resumes holding the host's busy
            lock, beside waiting guests only, until its next stage.

Everything else (guest.py's caps on the command line and deadlines, the host's
turns) is derived from TASKS, so a task's needs are written once, with their
reasons, here.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional


@dataclass(frozen=True)
class TaskNeeds:
    name: str
    cap: Optional[str] = None
    cmdline: str = ""
    options: tuple[str, ...] = ()
    settles: bool = False
    exclusive: bool = False


# The kprobe hist sets of the credit windows (a trace set's own needs:
# benchlib/boot/guest.py, trace_options()).
KPROBE_HIST_OPTIONS = ("CONFIG_KPROBE_EVENTS", "CONFIG_HIST_TRIGGERS")

# The init's kprobes on the 8250 driver's start-up and backup timer (fixtures/init,
# watch_uarts).
UART_WATCH = "bench.uart_watch=1"

TASKS: dict[str, TaskNeeds] = {t.name: t for t in (
    # The probe blocks in getrandom() until the RNG is ready (or its timeout): an
    # LRNG guest of a quiet profile held its host for the whole 60 s when only
    # `until` settled it.
    TaskNeeds("probe", settles=True),
    # Waits for the variant's final milestone or its cap; the guest idles.
    TaskNeeds("until", cap="until_cap", settles=True),
    # The entropy capture raises serial interrupts on the data channel by the tens
    # of thousands a second. When the 8250 handler finds most of them already
    # served (IRQ_NONE), the kernel's spurious-interrupt check disables the line
    # ("irq 3: nobody cared ... Disabling IRQ #3": once in the 30 captures of a
    # full default run beside other boots, 2026-12-06) and the channel falls
    # silent: a boot that captures turns that check off (nothing of the RNG
    # depends on it). About 10 s alone and CPU-bound; beside other boots on 2
    # cores it got 59,000 of its 100,000 samples in its 300 s: exclusive.
    # It also checks that the 8250 driver's backup timer stayed idle (the UART watch:
    # fixtures/init, open_uarts): a port wrongly marked buggy paces byte-at-a-time
    # writes to the timer's ticks.
    TaskNeeds("entropy_capture", cap="entropy_cap", cmdline=f"noirqdebug {UART_WATCH}",
              exclusive=True),
    # What the UART watch saw (test_uarts.py): the driver's start-ups and the backup
    # timer's ticks, counted by kprobes armed before the init opens the UARTs.
    TaskNeeds("uarts", cmdline=UART_WATCH, options=("CONFIG_KPROBE_EVENTS",)),
    # The interrupts-off benchmark (benchlib/commands/irqsoff.py, the VARIANT+irqsoff kernels):
    # the irqsoff tracer runs from its registration at boot, without tracing every
    # function inside a section (that would lengthen each many times under TCG).
    # Another guest's load on the host would stretch the guest time of a section:
    # exclusive.
    TaskNeeds("irqsoff", cmdline="ftrace=irqsoff trace_options=nofunction-trace",
              exclusive=True),
    # A vCPU the host plugs in while the guest runs (test_vmbus_hotadd.py): the
    # kernel must take it through ACPI and bring it online (the msr driver it reads
    # the partition's MSRs through is a device driver: benchlib/core/modules.py).
    TaskNeeds("hotadd", options=("CONFIG_HOTPLUG_CPU", "CONFIG_ACPI_HOTPLUG_CPU")),
    # Credit windows, read through kprobe hist triggers.
    TaskNeeds("credit", options=KPROBE_HIST_OPTIONS),
    TaskNeeds("vmbus", options=KPROBE_HIST_OPTIONS),
    TaskNeeds("vmbus_sint", options=KPROBE_HIST_OPTIONS),
    # A read held in its copy to user space by userfaultfd, its kernel stack taken
    # by kprobes (fixtures/keyerase.c, benchlib/checks/keyerase.py).
    TaskNeeds("writerekey", options=KPROBE_HIST_OPTIONS),
    # CPU 1 offline and back, its key fetches traced (pytest/test_lrng.py).
    TaskNeeds("cpukey", options=("CONFIG_HOTPLUG_CPU", "CONFIG_KPROBE_EVENTS")),
    # Suspend to RAM, woken by the host (pytest/test_resume.py).
    TaskNeeds("suspend", options=("CONFIG_SUSPEND",)),
    TaskNeeds("keyerase", options=("CONFIG_USERFAULTFD", "CONFIG_KPROBE_EVENTS")),
)}


def needs(name: str) -> TaskNeeds:
    """A task's description; a task not in TASKS needs nothing of the host."""
    return TASKS.get(name, TaskNeeds(name))


def stage(task: str) -> str:
    """The stage name (benchlib/boot/stages.py) the init's marker for a task gives."""
    return f"task:{task}"


# Derived views, for the modules that need one aspect.
CAPPED: dict[str, str] = {t.name: t.cap for t in TASKS.values() if t.cap}
SETTLED_STAGES: tuple[str, ...] = tuple(stage(t.name) for t in TASKS.values() if t.settles)
EXCLUSIVE_STAGES: tuple[str, ...] = tuple(stage(t.name) for t in TASKS.values() if t.exclusive)


def cmdline_words(tasks: list[str]) -> list[str]:
    """The kernel command-line words the given tasks need, once each, in order."""
    words: list[str] = []
    for task in tasks:
        for word in needs(task).cmdline.split():
            if word not in words:
                words.append(word)
    return words
