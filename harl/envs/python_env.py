"""Your own environment, without editing harl: ``[env] kind = "python"``.

::

    [env]
    kind = "python"
    factory = "my_pkg.my_env:make_env"   # module path : callable returning a MultiAgentEnv

    [env.kwargs]                         # keyword arguments for the callable (any TOML values)
    max_steps = 25

The callable is imported when the pipeline is loaded, so a wrong path is reported with
the file and key (``env.factory``) before anything runs; the module is looked up on
``sys.path`` and then in the current directory.  It is called once per environment
copy (in worker processes too) with ``kwargs``, and what it returns must implement the
``MultiAgentEnv`` protocol of ``harl/envs/protocol.py``.  ``examples/custom_env.py`` is a
complete example.
"""

from __future__ import annotations

import difflib
import inspect
from collections.abc import Callable
from typing import Any

import attrs

from harl.errors import ConfigError, EnvCrashedError, HarlError
from harl.registry import register
from harl.settings import InvalidSetting, kind_field, setting
from harl.user_import import import_module as _import_module

REQUIRED = ("n_agents", "observation_spaces", "action_spaces", "state_space", "reset", "step", "close")
"""What a factory's result must have (the ``MultiAgentEnv`` protocol)."""


def _invalid(key: str, message: str) -> InvalidSetting:
    return InvalidSetting(key, message, suggest_default=False)


def resolve_factory(path: str, key: str = "factory") -> Callable[..., Any]:
    """The callable named by ``"module.path:attribute"``; ``InvalidSetting(key, ...)`` if not."""
    module_name, sep, attribute = path.partition(":")
    if not sep or not module_name or not attribute:
        raise _invalid(
            key, f'expected "module.path:callable" (e.g. "my_pkg.my_env:make_env"), got "{path}"'
        )
    try:
        module = _import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name is not None and (module_name == exc.name or module_name.startswith(exc.name + ".")):
            raise _invalid(
                key,
                f'cannot import module "{module_name}" ({exc}); it must be importable from '
                "sys.path or the current directory",
            ) from None
        raise _invalid(
            key, f'importing "{module_name}" raised {type(exc).__name__}: {exc}'
        ) from exc
    except Exception as exc:  # noqa: BLE001 - any failure inside the user's module
        raise _invalid(
            key, f'importing "{module_name}" raised {type(exc).__name__}: {exc}'
        ) from exc
    target: Any = module
    for part in attribute.split("."):
        try:
            target = getattr(target, part)
        except (AttributeError, ImportError):  # a module's __getattr__ may raise ImportError (supersuit)
            names = [n for n in dir(target) if not n.startswith("_")]
            hint = difflib.get_close_matches(part, names, n=1)
            near = f' (did you mean "{hint[0]}"?)' if hint else ""
            raise _invalid(key, f'module "{module_name}" has no attribute "{attribute}"{near}') from None
    if not callable(target):
        raise _invalid(
            key, f'"{path}" is {type(target).__name__} {target!r}, not a callable that makes an env'
        )
    return target


@attrs.frozen
class PythonEnvConfig:
    """``[env] kind = "python"``: an environment made by your own callable."""

    kind: str = kind_field("python")
    factory: str = setting(
        "", '"module.path:callable" returning a MultiAgentEnv (e.g. "my_pkg.my_env:make_env")'
    )
    kwargs: dict[str, Any] = setting(
        factory=dict, doc="keyword arguments for the factory ([env.kwargs] table)"
    )

    def __attrs_post_init__(self) -> None:
        factory = resolve_factory(self.factory)
        try:
            signature = inspect.signature(factory)
        except (TypeError, ValueError):  # builtins and C callables may have none
            return
        try:
            signature.bind(**self.kwargs)
        except TypeError as exc:
            raise _invalid(
                "kwargs", f'"{self.factory}" cannot take these arguments: {exc}; its signature is '
                f"{signature}"
            ) from None


def check_env(env: Any, factory: str) -> Any:
    """``env`` if it looks like a ``MultiAgentEnv``, else a ``ConfigError`` naming ``env.factory``."""
    missing = [name for name in REQUIRED if not hasattr(env, name)]
    if missing:
        raise ConfigError(
            f'env.factory: "{factory}" returned {type(env).__name__} {_short(env)}, which is not a '
            f"MultiAgentEnv (missing: {', '.join(missing)}); see the protocol in harl/envs/protocol.py"
        )
    n = env.n_agents
    counts = {"observation_spaces": len(env.observation_spaces), "action_spaces": len(env.action_spaces)}
    wrong = {name: count for name, count in counts.items() if count != n}
    if wrong:
        listed = ", ".join(f"{count} {name}" for name, count in wrong.items())
        raise ConfigError(f'env.factory: "{factory}" returned an env with n_agents = {n} but {listed}')
    return env


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def make_python_env(config: PythonEnvConfig, render_mode: str | None = None) -> Any:
    """Call the factory with ``kwargs`` and check that the result is a ``MultiAgentEnv``.

    ``render_mode`` (``harl render``) is passed on to a factory that takes one.
    """
    factory = resolve_factory(config.factory)
    kwargs = dict(config.kwargs)
    if render_mode is not None:
        if not _takes(factory, "render_mode"):
            raise HarlError(
                f'env.factory: "{config.factory}" takes no render_mode, so harl render cannot film it; give '
                "it a render_mode=None parameter and the env a render() method returning an (H, W, 3) "
                "uint8 frame"
            )
        kwargs["render_mode"] = render_mode
    try:
        env = factory(**kwargs)
    except Exception as exc:  # noqa: BLE001 - any failure in the user's constructor
        raise EnvCrashedError(
            f'env.factory: "{config.factory}" raised {type(exc).__name__}: {exc} while building the environment'
        ) from exc
    return check_env(env, config.factory)


def _takes(factory: Callable[..., Any], name: str) -> bool:
    """Whether ``factory`` accepts the keyword ``name`` (by name or through ``**kwargs``)."""
    try:
        parameters = inspect.signature(factory).parameters.values()
    except (TypeError, ValueError):  # builtins and C callables may have none
        return False
    return any(p.name == name or p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters)


register("env", PythonEnvConfig, make_python_env)
