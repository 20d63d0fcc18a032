"""Raw env-steps/s of each environment family through harl's vector envs (random actions).

    python benchmarks/env_throughput.py                  # every family whose extra is installed
    python benchmarks/env_throughput.py --only vmas --steps 200
    python benchmarks/env_throughput.py --only mpe --backends inline,subprocess,ray --workers 2
    python benchmarks/env_throughput.py --only mamujoco --case "Ant 4x2" --backends inline,subprocess,ray --workers 1,2

One env step is one step of one environment (all agents acting).  Each case builds the
vector env the way a pipeline does (``make_vector_env``, inline backend), steps it with
pre-drawn uniformly random actions, and prints one JSON line.  Where harl drives a
simulator below its public API (MPE, MaMuJoCo), the public API's rate is printed too.
A tensor-native env (VMAS) is stepped with action tensors on its device, as the
collectors do; ``numpy_env_steps_per_s`` is the same env seen through ``NumpyVectorEnv``
(numpy actions in, arrays out: the numpy round trip the tensor path avoids).
``*_per_cpu_s`` divides by this process's CPU time instead of the wall clock (steadier on
a shared machine; the inline backend runs everything in this process).
torch runs on one thread, as in training.  ``load`` is the 1-minute load average when the
case ran (``uptime``'s first figure): on a shared machine, read every rate beside it.
An env with image observations also reports the rollout buffer's bytes per env step, as
stored (uint8 images: one byte a value) and as float32 would take them.
torch runs on one thread, as in training.  ``--backends`` measures other vector backends
too (worker processes, Ray actors: their CPU time is not this process's, so only the wall
clock compares them); each line carries the machine's load average, as ``uptime`` shows it.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from typing import Any

import numpy as np
import torch

from harl.envs.protocol import is_tensor_native
from harl.envs.vector import NumpyVectorEnv, make_vector_env
from harl.errors import MissingExtraError
from harl.nets.image import is_image
from harl.settings import InvalidSetting
from harl.sizes import rollout_bytes_per_step


def random_actions(venv: Any, rng: np.random.Generator) -> list[np.ndarray]:
    out = []
    for space in venv.action_spaces:
        if hasattr(space, "nvec"):
            out.append(np.stack([rng.integers(0, n, size=venv.n_envs) for n in space.nvec], 1))
        elif hasattr(space, "n"):
            out.append(rng.integers(0, space.n, size=(venv.n_envs, 1)))
        else:
            out.append(rng.uniform(space.low, space.high, (venv.n_envs, *space.shape)).astype(np.float32))
    return out


def vector_rate(config: Any, n_envs: int, steps: int, numpy_view: bool = False, backend: str = "inline",
                workers: int = 0) -> tuple[float, float]:
    """Env steps per second of wall-clock time and per second of this process's CPU time."""
    venv = make_vector_env(config, n_envs, backend, workers, seed=0)
    if numpy_view:
        venv = NumpyVectorEnv(venv)
    try:
        rng = np.random.default_rng(0)
        actions: list[list[Any]] = [random_actions(venv, rng) for _ in range(16)]
        if is_tensor_native(venv):  # what a collector hands it: tensors on the env's device
            actions = [[torch.as_tensor(a, device=venv.device) for a in batch] for batch in actions]
        venv.reset()
        for t in range(5):  # warm-up
            venv.step(actions[t])
        start, cpu = time.perf_counter(), time.process_time()
        for t in range(steps):
            venv.step(actions[t % 16])
        wall, cpu = time.perf_counter() - start, time.process_time() - cpu
        return steps * n_envs / wall, steps * n_envs / cpu
    finally:
        venv.close()


def image_bytes(config: Any) -> dict[str, int]:
    """Rollout bytes per env step (EP state, feed-forward) of an image env: stored, and if float32."""
    venv = make_vector_env(config, 1, "inline", seed=0)
    try:
        obs, state = list(venv.observation_spaces), venv.state_space
        if not any(is_image(s) for s in (*obs, state)):
            return {}
        size = int(np.prod(state.shape))
        as_float = [s.__class__(0.0, 1.0, s.shape, np.float32) for s in obs]
        return {"rollout_bytes_per_env_step": rollout_bytes_per_step(obs, venv.action_spaces, size, False, 0, 0, state),
                "rollout_bytes_per_env_step_float32": rollout_bytes_per_step(as_float, venv.action_spaces, size,
                                                                             False, 0, 0)}
    finally:
        venv.close()


def mamujoco_parallel_rate(config: Any, steps: int) -> float:
    """gymnasium-robotics' public parallel_env (+ state()), one env."""
    from harl.envs.mamujoco import make_parallel_env

    env = make_parallel_env(config)
    rng = np.random.default_rng(0)
    names = env.possible_agents
    actions = [{a: rng.uniform(-0.4, 0.4, env.action_space(a).shape) for a in names} for _ in range(16)]
    env.reset(seed=0)
    start = time.perf_counter()
    for t in range(steps):
        _, _, term, trunc, _ = env.step(actions[t % 16])
        env.state()
        if term[names[0]] or trunc[names[0]]:
            env.reset()
    return steps / (time.perf_counter() - start)


def cases() -> list[tuple[str, str, Any, int, str | None]]:
    from harl.envs.air_combat import AirCombatConfig
    from harl.envs.football import FootballConfig
    from harl.envs.gym_env import GymConfig
    from harl.envs.gymma import GymmaConfig
    from harl.envs.mamujoco import MaMuJoCoConfig
    from harl.envs.mpe import MPEConfig
    from harl.envs.pettingzoo import PettingZooConfig
    from harl.envs.python_env import PythonEnvConfig
    from harl.envs.smax import SMAXConfig
    from harl.envs.vmas_env import VMASConfig

    return [
        ("mpe", "simple_spread", MPEConfig(), 20, None),
        ("mamujoco", "HalfCheetah 2x3", MaMuJoCoConfig(agent_obsk=0), 20, "parallel"),
        ("mamujoco", "HalfCheetah 6x1", MaMuJoCoConfig(agent_conf="6x1"), 20, "parallel"),
        ("mamujoco", "Walker2d 6x1", MaMuJoCoConfig(scenario="Walker2d", agent_conf="6x1"), 20, "parallel"),
        ("mamujoco", "Ant 4x2", MaMuJoCoConfig(scenario="Ant", agent_conf="4x2"), 20, "parallel"),
        ("mamujoco", "Humanoid 17x1", MaMuJoCoConfig(scenario="Humanoid", agent_conf="17x1"), 20, "parallel"),
        ("gym", "Pendulum-v1", GymConfig(id="Pendulum-v1"), 8, None),
        ("gym", "CartPole-v1", GymConfig(id="CartPole-v1"), 8, None),
        ("gym", "HalfCheetah-v5", GymConfig(id="HalfCheetah-v5"), 20, None),
        ("vmas", "transport (64 envs)", VMASConfig(scenario="transport"), 64, None),
        ("vmas", "transport (1,024 envs)", VMASConfig(scenario="transport"), 1024, None),
        ("vmas", "balance (1,024 envs)", VMASConfig(scenario="balance"), 1024, None),
        ("vmas", "navigation (1,024 envs)", VMASConfig(scenario="navigation"), 1024, None),
        ("vmas", "simple_spread (1,024 envs)", VMASConfig(scenario="simple_spread"), 1024, None),
        ("smax", "3m (64 envs)", SMAXConfig(), 64, None),
        ("smax", "3m (256 envs)", SMAXConfig(), 256, None),
        ("football", "academy_3_vs_1_with_keeper", FootballConfig(), 1, None),
        ("air_combat", "heading", AirCombatConfig(), 1, None),
        ("air_combat", "2v2_noweapon", AirCombatConfig(task="2v2_noweapon"), 1, None),
        ("pettingzoo", "sisl multiwalker_v9", lambda: PettingZooConfig(env="pettingzoo.sisl.multiwalker_v9"), 8, None),
        ("pettingzoo", "sisl pursuit_v5 (8 agents)", lambda: PettingZooConfig(env="pettingzoo.sisl.pursuit_v5"), 8, None),
        ("pettingzoo", "butterfly cooperative_pong_v6 (drawn, resized 64x64)", lambda: PettingZooConfig(
            env="pettingzoo.butterfly.cooperative_pong_v6", state="observations", kwargs={"render_mode": "rgb_array"},
            wrappers=[{"wrapper": "supersuit:resize_v1", "kwargs": {"x_size": 64, "y_size": 64}}]), 8, None),
        ("pettingzoo", "magent2 battle_v4 (map 12, 4 agents)", lambda: PettingZooConfig(
            env="magent2.environments.battle_v4", kwargs={"map_size": 12}), 8, None),
        ("gymma", "LBF Foraging-8x8-2p-2f-coop-v3", lambda: GymmaConfig(), 10, None),
        ("gymma", "RWARE rware-tiny-2ag-v2", lambda: GymmaConfig(id="rware:rware-tiny-2ag-v2"), 10, None),
        ("python", "examples/custom_env.py", PythonEnvConfig(factory="examples.custom_env:make_env"), 8, None),
        ("python", "cooperative_pong 14x24x1 (benchmarks/coop_pong_images.py, pool 20)",
         PythonEnvConfig(factory="benchmarks.coop_pong_images:make_env", kwargs={"pool": 20}), 8, None),
    ]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=1000, help="vector steps per case (VMAS: a tenth of it)")
    p.add_argument("--only", help="one env kind (mpe, mamujoco, gym, vmas, smax, football, air_combat, pettingzoo, gymma, python)")
    p.add_argument("--backends", default="inline", help="comma-separated: inline, subprocess, ray")
    p.add_argument("--workers", default="0", help="comma-separated worker processes / Ray actors per case "
                   "(0: one per CPU), e.g. 1,2; the inline backend runs once")
    p.add_argument("--case", help="only the cases whose name contains this, e.g. 'Ant 4x2'")
    args = p.parse_args()
    torch.set_num_threads(1)
    runs = [(b, int(w)) for b in args.backends.split(",") for w in (["0"] if b == "inline" else args.workers.split(","))]
    for (kind, name, config, n_envs, reference), (backend, workers) in ((c, r) for c in cases() for r in runs):
        if (args.only and kind != args.only) or (args.case and args.case not in name):
            continue
        steps = max(20, args.steps // 10) if kind == "vmas" else args.steps
        try:
            if callable(config):  # a config that builds (and checks) its env when made: only when asked
                config = config()
            wall, cpu = vector_rate(config, n_envs, steps, backend=backend, workers=workers)
            result: dict[str, Any] = {"kind": kind, "case": name, "n_envs": n_envs, "backend": backend,
                                      "env_steps_per_s": round(wall), "env_steps_per_cpu_s": round(cpu),
                                      "load_1_5_15": [round(x, 2) for x in os.getloadavg()], **image_bytes(config)}
            if backend != "inline":
                result["workers"] = workers
            if reference == "parallel" and backend == "inline":
                result["parallel_env_steps_per_s"] = round(mamujoco_parallel_rate(config, steps))
            if kind == "vmas" and backend == "inline":
                wall, cpu = vector_rate(config, n_envs, steps, numpy_view=True)
                result.update(numpy_env_steps_per_s=round(wall), numpy_env_steps_per_cpu_s=round(cpu))
        except (MissingExtraError, InvalidSetting) as exc:  # InvalidSetting: e.g. magent2 not installed
            result = {"kind": kind, "case": name, "skipped": str(exc)}
        print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
