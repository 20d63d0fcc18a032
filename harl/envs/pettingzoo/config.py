"""``[env] kind = "pettingzoo"``: which PettingZoo env, and how to build it as a parallel env.

::

    [env]
    kind = "pettingzoo"
    env = "pettingzoo.sisl.multiwalker_v9"   # a module with parallel_env() (or an AEC env())
    # factory = "my_pkg.envs:make"           # or: a callable returning a Parallel or AEC env
    state = "auto"                           # env.state() where the env has one, else observations

    [env.kwargs]                             # passed to parallel_env / env / the factory
    n_walkers = 3

    [[env.wrappers]]                         # applied in order to the parallel env
    wrapper = "supersuit:resize_v1"
    kwargs = { x_size = 64, y_size = 64 }

AEC envs are converted with PettingZoo's ``aec_to_parallel`` when their metadata says
``is_parallelizable``; a turn-based game (one agent acts at a time: chess, tic-tac-toe)
cannot be, and is refused with the reason.  The config builds one env when it is
validated, so a wrong module, a space harl cannot handle or a turn-based game is
reported with the file and key path before anything runs.
"""

from __future__ import annotations

from typing import Any

import attrs

from harl.envs.pettingzoo.env import PettingZooEnv
from harl.settings import InvalidSetting, kind_field, one_of, setting

STATES = ("auto", "env", "observations")


def _invalid(key: str, message: str) -> InvalidSetting:
    return InvalidSetting(key, message, suggest_default=False)


@attrs.frozen
class PettingZooConfig:
    """``[env] kind = "pettingzoo"``: any PettingZoo env whose agents act at the same time."""

    kind: str = kind_field("pettingzoo")
    env: str = setting("", 'module with parallel_env() or env() (e.g. "pettingzoo.sisl.multiwalker_v9")')
    factory: str = setting("", '"module.path:callable" returning a PettingZoo Parallel or AEC env, '
                               "instead of env")
    kwargs: dict[str, Any] = setting(factory=dict, doc="keyword arguments for the env's constructor "
                                                       "([env.kwargs] table)")
    wrappers: list[dict[str, Any]] = setting(
        factory=list, doc='[[env.wrappers]] tables: wrapper = "module:callable" (e.g. "supersuit:resize_v1") '
                          "and its kwargs, applied in order to the parallel env")
    flatten: bool = setting(False, "flatten observations and the global state to 1-D (for MLP encoders); "
                                   "false keeps an image an image, (H, W, C)")
    state: str = setting("auto", "global state: env (env.state()), observations (the agents' side by "
                                 "side) or auto (env where the env has a state, else observations)",
                         one_of(STATES))

    def __attrs_post_init__(self) -> None:
        if bool(self.env) == bool(self.factory):
            raise _invalid("env", 'name the env module (env = "pettingzoo.sisl.multiwalker_v9") or a '
                                  'factory (factory = "my_pkg.envs:make"), exactly one of them')
        PettingZooEnv(self).close()  # a probe: every problem is found now, with its key path
