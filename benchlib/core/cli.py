"""How the bench's commands end: one line and an exit code for every way out.

0/1 as the command says; 2 for bad input (a BenchError, a failed build step);
130 when interrupted (SIGINT, or SIGTERM/SIGHUP through guest.install_signal_handlers),
after every running guest was destroyed by its boot's `finally`."""
from __future__ import annotations

import subprocess
import sys
from typing import Callable

from .errors import BenchError

EXIT_BAD_INPUT = 2
EXIT_INTERRUPTED = 130


def run_main(prog: str, main: Callable[[list[str]], int]) -> None:
    try:
        sys.exit(main(sys.argv[1:]))
    except BenchError as exc:
        print(f"{prog}: {exc}", file=sys.stderr)
        sys.exit(EXIT_BAD_INPUT)
    except KeyboardInterrupt as exc:
        print(f"{prog}: interrupted ({exc or 'SIGINT'}): the running guest was destroyed, "
              "its logs are kept under results/", file=sys.stderr)
        sys.exit(EXIT_INTERRUPTED)
    except subprocess.CalledProcessError as exc:
        print(f"{prog}: '{' '.join(map(str, exc.cmd))}' failed with exit code "
              f"{exc.returncode}", file=sys.stderr)
        sys.exit(EXIT_BAD_INPUT)
