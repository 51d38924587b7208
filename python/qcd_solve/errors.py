"""The exceptions of qcd_solve: one per exit code of the qcd-solve program.

Every exception is a `qcd_solve.Error`; its `exit_code` is the code the command line
exits with for the same error (README, "Exit codes"), and `str(e)` the same message.
"""


class Error(Exception):
    """An error of qcd-solve; `exit_code` is the program's exit code for it."""

    exit_code = 1

    def __init__(self, message):
        super().__init__(message)
        self.message = message


class ConfigError(Error, ValueError):
    """A bad option or value (a config that does not parse, kappa <= 0, a bad shape): 2."""

    exit_code = 2


class FileError(Error, OSError):
    """A file that cannot be opened, read or written: 3."""

    exit_code = 3


class FormatError(Error):
    """A file whose content is malformed or disagrees with itself (checksum, plaquette,
    links off SU(3), NaN): 4."""

    exit_code = 4


class CudaError(Error):
    """No usable GPU, driver or NVRTC where one was required, or a CUDA failure: 5."""

    exit_code = 5


class OutOfMemoryError(Error, MemoryError):
    """The problem does not fit in device or host memory: 6."""

    exit_code = 6


class NotConvergedError(Error):
    """The solver stopped without reaching the tolerance: 7. `solution` and `report`
    hold what the solve produced (None for a propagator)."""

    exit_code = 7

    def __init__(self, message, solution=None, report=None):
        super().__init__(message)
        self.solution = solution
        self.report = report


class CheckFailedError(Error):
    """A validation or benchmark check failed: 8."""

    exit_code = 8


class InternalError(Error):
    """An internal invariant did not hold (a bug, please report): 9."""

    exit_code = 9


BY_EXIT_CODE = {
    cls.exit_code: cls
    for cls in (
        ConfigError,
        FileError,
        FormatError,
        CudaError,
        OutOfMemoryError,
        NotConvergedError,
        CheckFailedError,
        InternalError,
    )
}


def from_native(exc):
    """The exception of a `_native.NativeError(exit_code, message)`."""
    code, message = exc.args[0] if len(exc.args) == 1 else exc.args
    return BY_EXIT_CODE.get(code, InternalError)(message)
