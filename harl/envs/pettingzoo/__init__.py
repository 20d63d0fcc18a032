"""``[env] kind = "pettingzoo"``: any PettingZoo env whose agents act at the same time.

``config`` says which env and builds it as a parallel env (AEC conversion, wrappers),
``spaces`` turns each agent's observation space into harl's (masks, flattening, the
global state side by side), ``env`` steps it as a ``MultiAgentEnv``.  PettingZoo itself
is imported only when an env is built.
"""

from harl.envs.pettingzoo.config import PettingZooConfig
from harl.envs.pettingzoo.env import PettingZooEnv, make_pettingzoo_env
from harl.registry import register

__all__ = ["PettingZooConfig", "PettingZooEnv", "make_pettingzoo_env"]


register("env", PettingZooConfig, make_pettingzoo_env)
