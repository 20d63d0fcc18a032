"""Run PKU-MARL/HARL's own MaMuJoCo training on gymnasium's MuJoCo v5 robots (HARL's python).

HARL's MaMuJoCo asks ``gym.make("HalfCheetah-v2")`` (mujoco-py and MuJoCo 2.1 binaries, which
do not install here).  This launcher swaps that one call for gymnasium's v5 robot of the
same name, behind the old gym step API HARL expects, and leaves everything else (HARL's
observations, state, partitions, runner, algorithms, logging) as HARL has it.  It separates
algorithm from simulator: HARL's code and harl's on one physics (the one harl trains on).

    cd HARL && ~/harl-venv/bin/python ~/harl/benchmarks/harl_on_v5.py \\
        --load_config tuned_configs/mamujoco/HalfCheetah-v2-2x3/hatd3/config.json \\
        --seed 1 --num_env_steps 390000 --cuda False --torch_threads 1

Needs ``mujoco`` and ``gymnasium`` in HARL's venv.  Run from HARL's checkout root, with
``--use_eval False --eval_interval 2000`` for a train-return line every 20k env steps.  Then,
in any venv, HARL's logs beside harl's runs of the same config (``harl train config.json``),
block by block at HARL's log steps (HARL's first block holds the warm-up's episodes too)::

    python benchmarks/harl_on_v5.py compare --harl-logs H1/stdout.log H2/stdout.log \
        --runs runs/cheetah-s1 runs/cheetah-s2
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


def compare(argv: list[str]) -> None:
    """Mean train return per HARL log block, per seed and over seeds, HARL beside harl."""
    import argparse
    import csv
    import statistics

    sys.path.insert(0, str(Path(__file__).parent))
    from harl_parity import parse_harl_log

    p = argparse.ArgumentParser(prog="harl_on_v5.py compare")
    p.add_argument("--harl-logs", nargs="+", required=True)
    p.add_argument("--runs", nargs="+", required=True, help="harl run directories")
    args = p.parse_args(argv)
    ref = [{int(r["env_steps"]): float(r["train_return"]) for r in parse_harl_log(Path(f).read_text().splitlines())
            if r["train_return"] != ""} for f in args.harl_logs]
    steps = sorted(set().union(*ref))
    ours = []
    for run in args.runs:
        with (Path(run) / "metrics.csv").open(newline="") as f:
            rows = [(int(float(r["env_steps"])), float(r["train_return"])) for r in csv.DictReader(f) if r["train_return"]]
        blocks, last = {}, 0
        for step in steps:
            inside = [ret for at, ret in rows if last < at <= step]
            if inside and rows[-1][0] >= step:
                blocks[step] = statistics.mean(inside)
            last = step

        ours.append(blocks)

    def cell(values: list[float]) -> str:
        if not values:
            return ""
        spread = f" ± {statistics.pstdev(values):.0f}" if len(values) > 1 else ""
        return f"{statistics.mean(values):.0f}{spread} ({len(values)}): " + ", ".join(f"{v:.0f}" for v in values)

    print("| env steps | HARL's code on v5 | harl |\n|---|---|---|")
    for step in steps:
        h = [r[step] for r in ref if step in r]
        o = [b[step] for b in ours if step in b]
        print(f"| {step:,} | {cell(h)} | {cell(o)} |")


def main() -> None:
    if sys.argv[1:2] == ["compare"]:
        compare(sys.argv[2:])
        return
    import gym
    from harl.envs.mamujoco.multiagent_mujoco import mujoco_multi

    mujoco_multi.gym = types.SimpleNamespace(make=_make_v5, error=gym.error)  # type: ignore[assignment]
    train = Path.cwd() / "examples" / "train.py"
    sys.argv = [str(train), "--env", "mamujoco", *sys.argv[1:]]
    sys.path.insert(0, str(train.parent))
    runpy.run_path(str(train), run_name="__main__")


if __name__ == "__main__":
    main()
