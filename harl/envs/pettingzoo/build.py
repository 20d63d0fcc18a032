"""Build the configured PettingZoo env as a parallel env: import, construct, convert, wrap.

Every problem is an ``InvalidSetting`` naming its key (``env``, ``factory``,
``wrappers[i]``), so the pipeline loader reports it with the file and key path.
"""

from __future__ import annotations

import difflib
import importlib
import pkgutil
from typing import Any

from harl.envs.python_env import resolve_factory
from harl.errors import MissingExtraError
from harl.settings import InvalidSetting
from harl.user_import import import_module


def _invalid(key: str, message: str) -> InvalidSetting:
    return InvalidSetting(key, message, suggest_default=False)


def wrapper(table: dict[str, Any], i: int) -> tuple[Any, dict[str, Any]]:
    """The wrapper callable and its kwargs of ``[[env.wrappers]]`` entry ``i``."""
    where = f"wrappers[{i}]"
    extra = sorted(set(table) - {"wrapper", "kwargs"})
    if extra or not isinstance(table.get("wrapper"), str) or not isinstance(table.get("kwargs", {}), dict):
        raise _invalid(where, f"expected a table with wrapper = \"module:callable\" and an optional kwargs "
                              f"table, got keys {sorted(table)}")
    return resolve_factory(table["wrapper"], f"{where}.wrapper"), table.get("kwargs", {})


_DEPENDENCIES = ('; install the env family\'s dependencies (pip install "pettingzoo[sisl]" for the sisl '
                 'envs, "pettingzoo[butterfly]" for butterfly, ...)')


def _import_env_module(name: str) -> Any:
    try:
        return import_module(name)
    except ModuleNotFoundError as exc:
        if exc.name is None or not (name == exc.name or name.startswith(exc.name + ".")):
            if name.startswith("pettingzoo.") and exc.name:  # a family's own dependency (Box2D for sisl)
                raise MissingExtraError(f'env "{name}"', "pettingzoo", exc.name) from None
            raise _invalid("env", f'importing "{name}" failed: {exc}{_DEPENDENCIES}') from None
        if exc.name == "pettingzoo":
            raise MissingExtraError('env kind "pettingzoo"', "pettingzoo", "pettingzoo") from None
        raise _invalid("env", f'cannot import module "{name}" ({exc}){_sibling_hint(name)}') from None
    except ImportError as exc:  # e.g. a family's own dependency (Box2D for sisl) is missing
        raise _invalid("env", f'importing "{name}" failed: {exc}{_DEPENDENCIES}') from None


def _sibling_hint(name: str) -> str:
    """``; did you mean "pettingzoo.sisl.pursuit_v5"?`` when the package exists but the module not."""
    parent, _, leaf = name.rpartition(".")
    try:
        package = importlib.import_module(parent) if parent else None
    except ImportError:
        return ""
    if package is None or not hasattr(package, "__path__"):
        return ""
    siblings = [info.name for info in pkgutil.iter_modules(package.__path__)]
    hint = difflib.get_close_matches(leaf, siblings, n=1, cutoff=0.5)
    return f'; did you mean "{parent}.{hint[0]}"?' if hint else ""


def _call(key: str, what: str, make: Any, *args: Any, **kwargs: Any) -> Any:
    try:
        return make(*args, **kwargs)
    except Exception as exc:  # noqa: BLE001 - any failure in the env's constructor, reported as such
        raise _invalid(key, f"{what} raised {type(exc).__name__}: {exc}") from None


def _as_parallel(made: Any, key: str, name: str) -> Any:
    """``made`` as a PettingZoo ParallelEnv (an AEC env converted), or why it cannot be."""
    from pettingzoo.utils.conversions import aec_to_parallel
    from pettingzoo.utils.env import AECEnv, ParallelEnv

    if isinstance(made, ParallelEnv):
        return made
    if not isinstance(made, AECEnv):
        raise _invalid(key, f"{name} made {type(made).__name__}, which is not a PettingZoo env (neither a "
                            "ParallelEnv nor an AECEnv); harl's other env kinds: gym, gymma, python")
    if not made.metadata.get("is_parallelizable", False):
        made.close()
        raise _invalid(key, f"{name} is a turn-based AEC env (its metadata has no is_parallelizable: one "
                            "agent acts at a time, as in board and card games), and harl's collectors step "
                            "all agents at once; only AEC envs whose agents can act simultaneously are "
                            "converted (pettingzoo.utils.aec_to_parallel)")
    return aec_to_parallel(made)


def build_parallel(config: Any, render_mode: str | None = None) -> Any:
    """The ``PettingZooConfig``'s env as a PettingZoo ParallelEnv, wrappers applied; ``InvalidSetting`` if not."""
    kwargs = dict(config.kwargs)
    if render_mode is not None:
        kwargs["render_mode"] = render_mode
    if config.factory:
        key, name = "factory", f'"{config.factory}"'
        env = _call(key, name, resolve_factory(config.factory), **kwargs)
    else:
        key, module = "env", _import_env_module(config.env)
        maker = getattr(module, "parallel_env", None) or getattr(module, "env", None)
        if not callable(maker):
            raise _invalid("env", f'module "{config.env}" has neither parallel_env() nor env(), so it is not '
                                  'a PettingZoo env module (e.g. "pettingzoo.sisl.multiwalker_v9"); for an '
                                  'env made another way, use factory = "module:callable"')
        name = f'"{config.env}.{maker.__name__}"'
        env = _call(key, name, maker, **kwargs)
    env = _as_parallel(env, key, name)
    for i, table in enumerate(config.wrappers):
        wrap, wrap_kwargs = wrapper(table, i)
        env = _call(f"wrappers[{i}]", f'"{table["wrapper"]}"', wrap, env, **wrap_kwargs)
        env = _as_parallel(env, f"wrappers[{i}]", f'wrapper "{table["wrapper"]}"')
    return env
