"""User-facing errors: one paragraph that names the file, the key path and the fix.

The CLI prints ``HarlError`` messages without a traceback and exits with status 2;
anything else is a bug and keeps its traceback.
"""

from __future__ import annotations

import importlib
import warnings
from collections.abc import Callable
from types import ModuleType


class HarlError(Exception):
    """A problem the user can fix (bad pipeline, bad run directory, missing package)."""


class ConfigError(HarlError):
    """A pipeline file or override that does not describe a valid pipeline."""


class MissingExtraError(HarlError):
    """An optional package that the pipeline needs is not installed."""

    def __init__(self, what: str, extra: str, module: str) -> None:
        super().__init__(
            f'{what} needs: pip install "harl[{extra}]" '
            f'(the optional package "{module}" is not installed)'
        )


def import_extra(module: str, what: str, extra: str) -> ModuleType:
    """``module``, or a ``MissingExtraError`` naming ``what`` needs it and the extra to install."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise MissingExtraError(what, extra, module) from exc


class EnvCrashedError(HarlError):
    """An environment (or the worker process that hosts it) failed while stepping."""


class CheckpointError(HarlError):
    """A checkpoint or run directory that cannot be read."""


class EnvProtocolError(HarlError):
    """An environment returned something the ``MultiAgentEnv`` protocol does not allow."""


class NonFiniteError(HarlError):
    """A NaN or infinity where training needs finite numbers (env outputs, losses)."""


class ResourceError(HarlError):
    """A size that cannot fit in memory, or a file that cannot be written (disk full, read-only)."""


class StageError(HarlError):
    """A stage (harl's or a user's) raised during training: the slot, the kind, its module and
    the frames of the traceback outside harl (the user's code), in one paragraph."""


REMOVED_IN = "harl 0.2"
"""The release that drops the names deprecated in this one: the next minor version after
pyproject.toml's (a test keeps the two in step, so bumping the version finds them)."""


class HarlDeprecationWarning(DeprecationWarning):
    """An old name of harl's that still works until ``REMOVED_IN``; the ``harl`` command shows these."""


def deprecated(old: str, new: str, stacklevel: int = 3) -> None:
    """Warn that ``old`` is ``new`` now.  ``stacklevel`` 3: the line of the caller of the function
    that calls this (a property, a module's ``__getattr__``), i.e. the code that still uses ``old``."""
    warnings.warn(f"{old} is deprecated: use {new} ({old} is removed in {REMOVED_IN})",
                  HarlDeprecationWarning, stacklevel=stacklevel)


def old_names(module: str, renamed: dict[str, tuple[str, object]]) -> Callable[[str], object]:
    """A module's ``__getattr__`` that serves each old name of ``renamed`` (old -> (new name, the object))
    with a ``HarlDeprecationWarning``, and any other name as a missing attribute, as without one::

        if not TYPE_CHECKING:  # mypy does not see old names, so harl's own code cannot use one
            __getattr__ = old_names(__name__, {"OldName": ("NewName", NewName)})
    """
    def __getattr__(name: str) -> object:
        if name in renamed:
            new, value = renamed[name]
            deprecated(f"{module}.{name}", f"{module}.{new}")  # stacklevel 3: the code that used the old name
            return value
        raise AttributeError(f"module {module!r} has no attribute {name!r}")
    return __getattr__
