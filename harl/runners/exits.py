"""How a HARL script that catches nothing ends on harl's errors: one paragraph, exit 2.

HARL's ``examples/train.py`` calls the runner without ``try``; a ``HarlError`` (or a
stopped run) would end it with a traceback and status 1.  ``install_excepthook`` (run when
``harl.runners`` is imported) makes exactly those two end the way ``harl train`` does:
``harl: <paragraph>`` on stderr and status 2, or 128 + the signal for a run stopped by
Ctrl-C / SIGTERM.  Every other exception keeps Python's traceback.
"""

from __future__ import annotations

import atexit
import os
import sys
from types import TracebackType

from harl.errors import ConfigError, HarlError
from harl.rundir.signals import exit_status, signal_name


class UnknownAlgorithmError(ConfigError, KeyError):
    """``RUNNER_REGISTRY[name]`` for a name it does not hold; a ``KeyError`` as a dict's would be."""

    def __str__(self) -> str:  # KeyError would quote the whole paragraph
        return str(self.args[0])


class RunStopped(KeyboardInterrupt):
    """``run()`` was stopped by Ctrl-C or SIGTERM after its checkpoint was written.

    A ``KeyboardInterrupt``, so a script's ``except KeyboardInterrupt`` still sees Ctrl-C.
    """

    def __init__(self, message: str, signum: int) -> None:
        super().__init__(message)
        self.signum = signum


def _end(status: int, text: str) -> None:
    """Print ``text``, run the exit handlers (env workers) and leave with ``status``."""
    sys.stdout.flush()
    print(f"harl: {text}", file=sys.stderr, flush=True)
    try:
        atexit._run_exitfuncs()  # os._exit skips them; multiprocessing's stops the env workers
    finally:
        os._exit(status)


def _hook(previous: object) -> object:
    def hook(kind: type[BaseException], exc: BaseException, tb: TracebackType | None) -> None:
        if isinstance(exc, RunStopped):
            _end(exit_status(exc.signum), str(exc))
        if isinstance(exc, HarlError) and os.environ.get("HARL_DEBUG") != "1":
            _end(2, str(exc))
        previous(kind, exc, tb)  # type: ignore[operator]

    hook.harl_runners = True  # type: ignore[attr-defined]
    return hook


def install_excepthook() -> None:
    """Wrap ``sys.excepthook`` once (``HARL_DEBUG=1`` keeps the traceback of harl's errors)."""
    if not getattr(sys.excepthook, "harl_runners", False):
        sys.excepthook = _hook(sys.excepthook)  # type: ignore[assignment]


__all__ = ["RunStopped", "UnknownAlgorithmError", "install_excepthook", "signal_name"]
