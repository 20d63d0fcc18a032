"""Run PKU-MARL/HARL's own MaMuJoCo training on gymnasium's MuJoCo v5 robots (HARL's python).

HARL's MaMuJoCo asks ``gym.make("HalfCheetah-v2")`` (mujoco-py and MuJoCo 2.1 binaries, which
do not install here).  This launcher swaps that one call for gymnasium's v5 robot of the
same name, behind the old gym step API HARL expects, and leaves everything else (HARL's
observations, state, partitions, runner, algorithms, logging) as HARL has it.  It separates
algorithm from simulator: HARL's code and harl's on one physics (the one harl trains on).

    cd HARL && ~/harl-venv/bin/python ~/harl/benchmarks/harl_on_v5.py \\
        --load_config tuned_configs/mamujoco/HalfCheetah-v2-2x3/hatd3/config.json \\
        --seed 1 --num_env_steps 390000 --cuda False --torch_threads 1

Needs ``mujoco`` and ``gymnasium`` in HARL's venv.  Run from HARL's checkout root.
"""

from __future__ import annotations

import runpy
import sys
import types
from pathlib import Path
from typing import Any


class OldApiTimeLimit:
    """A v5 robot behind gym 0.21's API: ``step`` gives ``(obs, reward, done, info)``, done at the limit.

    ``env`` is the bare MuJoCo env (HARL reads ``env._get_obs()``), ``_max_episode_steps`` the
    limit HARL sets after construction.  ``seed`` takes effect at the next reset, as gym's did.
    """

    def __init__(self, env: Any) -> None:
        self.env = env
        self.action_space, self.observation_space = env.action_space, env.observation_space
        self._max_episode_steps = 1000
        self._elapsed = 0
        self._seed: int | None = None

    def seed(self, seed: int | None = None) -> list[int | None]:
        self._seed = seed
        return [seed]

    def reset(self, **kwargs: Any) -> Any:
        self._elapsed = 0
        obs, _ = self.env.reset(seed=self._seed)
        self._seed = None
        return obs

    def step(self, action: Any) -> tuple[Any, float, bool, dict[str, Any]]:
        obs, reward, terminated, truncated, info = self.env.step(action)
        self._elapsed += 1
        done = bool(terminated or truncated or self._elapsed >= self._max_episode_steps)
        return obs, float(reward), done, info


def _make_v5(name: str, **kwargs: Any) -> OldApiTimeLimit:
    import gymnasium

    robot = name.rsplit("-v", 1)[0]
    return OldApiTimeLimit(gymnasium.make(f"{robot}-v5").unwrapped)


def main() -> None:
    import gym
    from harl.envs.mamujoco.multiagent_mujoco import mujoco_multi

    mujoco_multi.gym = types.SimpleNamespace(make=_make_v5, error=gym.error)  # type: ignore[assignment]
    train = Path.cwd() / "examples" / "train.py"
    sys.argv = [str(train), "--env", "mamujoco", *sys.argv[1:]]
    sys.path.insert(0, str(train.parent))
    runpy.run_path(str(train), run_name="__main__")


if __name__ == "__main__":
    main()
