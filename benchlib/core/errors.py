"""The bench's errors: each one a single line that names the bad value."""
from __future__ import annotations


class BenchError(Exception):
    """A user-facing failure: bad input, or a guest that did not do its part."""


class UnknownProfile(BenchError):
    pass


class BadProfile(BenchError, ValueError):
    """A profile file that breaks the templating rules or lacks its metadata."""


class BadKernel(BenchError):
    pass


class Skip(BenchError):
    """A boot this host or this kernel cannot make; the message says why (a test
    skips with it, a matrix cell is reported skipped with it)."""


class NeedsKvm(Skip):
    """A profile needs an accelerator this host does not have."""


class MissingOptions(Skip):
    """A user's kernel lacks options the boot needs (its config says so)."""


class WaitFailed(BenchError):
    """What the host waited for in a running guest's data log never came (the
    deadline passed, the guest ended, the run was interrupted)."""


class BootFailed(BenchError):
    """A guest stopped or stalled before it finished; says the stage it reached."""

    def __init__(self, message: str, stage: str, console_log: str) -> None:
        super().__init__(f"{message} (last stage reached: {stage}; console log: {console_log})")
        self.stage = stage
        self.console_log = console_log
