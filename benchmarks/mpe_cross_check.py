"""harl's torch MPE simple_spread beside JaxMARL's own, step by step, in return distribution and in
what each side's logged training return averages.

    PYTHONPATH=/tmp/gymnax_pkg:/tmp/distrax_pkg python benchmarks/mpe_cross_check.py
    python benchmarks/mpe_cross_check.py --episodes 2000 --worlds 256 --skip-metric

Four parts (each prints its own table):

1. **Step by step.**  ``--worlds`` JaxMARL worlds drawn by its ``reset``; harl's
   ``MPETorchVectorEnv`` is given the same initial worlds (``set_initial_worlds``); both step with the
   same discrete actions (uniformly random, or the ``nearest`` / ``assigned`` heuristics computed from
   JaxMARL's observations) for 26 steps without any reset (JaxMARL's ``step_env``, harl's ``advance``).
   Per step: the largest absolute difference of the observations and of the per-agent rewards (harl
   ``team_reward = false``), and each side's episode-end flag.  Done three ways: JaxMARL in float32
   (as its baselines run) against harl's float32 and float64 worlds, and JaxMARL with ``jax_enable_x64``
   against harl's float64 (isolates the formulas from float32 rounding).
2. **Return distributions.**  ``--episodes`` episodes of each fixed policy on each env, each env drawing
   its own initial worlds and acting on its own observations.  The metric is the team return (the sum
   over agents and steps of the per-agent reward), which is both what harl's ``train_return`` averages
   under ``team_reward = true`` and what JaxMARL's ``MPELogWrapper`` reports averaged over agents (it logs
   ``num_agents x`` each agent's own return).  JaxMARL's episode runs as long as its ``done`` says;
   harl's as its ``max_episode_steps = 25`` says; JaxMARL's first 25 steps are also given.
3. **The logged metric.**  JaxMARL's ``MPELogWrapper`` with auto-reset, vmapped over the IPPO
   (16 x 128) and PQN (256 x 16) batch shapes, a fixed policy, and the logged value computed as the
   baseline files compute it (``info["returned_episode_returns"].mean()`` over steps, agents and envs,
   once per update); beside it harl's ``train_return`` (the mean of the team returns of the episodes
   that ended in the iteration) from harl's ``step``.  Needs gymnax/distrax importable (the wrapper module
   imports them); skipped otherwise.
4. **PQN's first observation.**  JaxMARL's ``CTRolloutManager`` zeroes a done agent's observation, so
   every episode after the first begins on an all-zero input: the heuristic's return when its first
   action of each episode is replaced by the action a zero input gives it (no-op) or by a fixed move.

Everything runs on the CPU with one thread each for torch and XLA.
"""

from __future__ import annotations

import argparse
import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ.setdefault("XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1")

import numpy as np  # noqa: E402
import torch  # noqa: E402

torch.set_num_threads(1)

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
from jaxmarl.environments.mpe.simple_spread import SimpleSpreadMPE  # noqa: E402

from harl.envs.mpe_torch.config import MPETorchConfig  # noqa: E402
from harl.envs.mpe_torch.vector import MPETorchVectorEnv  # noqa: E402

N = 3
"""Agents (and landmarks): JaxMARL's and harl's default."""
LIMIT = 25
"""harl's ``max_episode_steps`` in both side-by-side pipelines; JaxMARL's ``MAX_STEPS``."""


# ----------------------------------------------------------------------------- policies

def nearest(obs: np.ndarray) -> np.ndarray:
    """``(B, N, obs)`` -> ``(B, N)`` discrete actions: each agent heads for its nearest landmark along the
    axis of the larger offset (no-op within 0.05 on both axes).  Actions: 0 no-op, 1 -x, 2 +x, 3 -y, 4 +y."""
    rel = obs[..., 4:4 + 2 * N].reshape(*obs.shape[:2], N, 2)
    pick = np.linalg.norm(rel, axis=-1).argmin(-1)
    d = np.take_along_axis(rel, pick[..., None, None], axis=2)[..., 0, :]
    return _toward(d)


def assigned(obs: np.ndarray) -> np.ndarray:
    """Agent i heads for landmark i (a spread that seldom collides, nearer a trained policy's return)."""
    rel = obs[..., 4:4 + 2 * N].reshape(*obs.shape[:2], N, 2)
    d = rel[:, np.arange(N), np.arange(N)]
    return _toward(d)


def _toward(d: np.ndarray) -> np.ndarray:
    x_axis = np.abs(d[..., 0]) >= np.abs(d[..., 1])
    move = np.where(x_axis, np.where(d[..., 0] > 0, 2, 1), np.where(d[..., 1] > 0, 4, 3))
    return np.where(np.abs(d).max(-1) < 0.05, 0, move).astype(np.int64)


POLICIES = ("random", "nearest", "assigned")


def act(policy: str, obs: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    if policy == "random":
        return rng.integers(0, 5, size=obs.shape[:2])
    return nearest(obs) if policy == "nearest" else assigned(obs)


# ----------------------------------------------------------------------------- the two envs

class Jax:
    """JaxMARL's ``MPE_simple_spread_v3`` (``jaxmarl.make`` builds exactly this), vmapped over worlds."""

    def __init__(self) -> None:
        self.env = SimpleSpreadMPE(num_agents=N, num_landmarks=N, local_ratio=0.5)
        self.agents = self.env.agents
        self._reset = jax.jit(jax.vmap(self.env.reset))
        self._step_env = jax.jit(jax.vmap(self.env.step_env))

    def reset(self, key: jax.Array, b: int):
        obs, state = self._reset(jax.random.split(key, b))
        return self.stack(obs), state

    def step(self, key: jax.Array, state, actions: np.ndarray):
        """No auto-reset (``step_env``): ``(obs (B, N, o), state, rewards (B, N), done (B,))``."""
        b = actions.shape[0]
        acts = {a: jnp.asarray(actions[:, i]) for i, a in enumerate(self.agents)}
        obs, state, rew, done, _ = self._step_env(jax.random.split(key, b), state, acts)
        return self.stack(obs), state, self.stack(rew), np.asarray(done["__all__"])

    def stack(self, values: dict) -> np.ndarray:
        return np.stack([np.asarray(values[a]) for a in self.agents], axis=1)


def harl_env(b: int, precision: str, team_reward: bool, seed: int = 0) -> MPETorchVectorEnv:
    config = MPETorchConfig(scenario="simple_spread", continuous_actions=False, max_episode_steps=LIMIT,
                            n_agents=N, local_ratio=0.5, team_reward=team_reward, precision=precision)
    return MPETorchVectorEnv(config, b, seed)


def harl_obs(obs: list[torch.Tensor]) -> np.ndarray:
    return torch.stack(obs, 1).double().numpy()


def harl_actions(actions: np.ndarray) -> list[np.ndarray]:
    return [actions[:, i] for i in range(actions.shape[1])]


# ----------------------------------------------------------------------------- 1. step by step

def step_by_step(worlds: int, seed: int, precision: str, policy: str, steps: int = LIMIT + 1) -> dict:
    """Largest |harl - JaxMARL| per step over ``worlds`` worlds with the same start and actions."""
    jx = Jax()
    key = jax.random.PRNGKey(seed)
    key, k = jax.random.split(key)
    jobs, state = jx.reset(k, worlds)
    venv = harl_env(worlds, precision, team_reward=False)
    pos = np.asarray(state.p_pos, dtype=np.float64)
    obs, _, _ = venv.set_initial_worlds(torch.arange(worlds), pos[:, :N], pos[:, N:],
                                        np.zeros((worlds, 0), dtype=np.int64))
    rng = np.random.default_rng(seed)
    rows = [{"step": 0, "obs": float(np.abs(harl_obs(obs) - jobs).max()), "rew": 0.0,
             "jax_done": False, "harl_truncated": False, "contacts": 0}]
    for t in range(1, steps + 1):
        actions = act(policy, jobs.astype(np.float64), rng)
        key, k = jax.random.split(key)
        jobs, state, jrew, jdone = jx.step(k, state, actions)
        obs, _, rew, truncated = venv.advance(harl_actions(actions))
        gap = np.linalg.norm(np.asarray(state.p_pos)[:, :N, None] - np.asarray(state.p_pos)[:, None, :N], axis=-1)
        contacts = int(((gap < 0.3) & ~np.eye(N, dtype=bool)).any((1, 2)).sum())
        rows.append({"step": t, "obs": float(np.abs(harl_obs(obs) - jobs).max()),
                     "rew": float(np.abs(rew.double().numpy() - jrew).max()),
                     "jax_done": bool(jdone.all()) if jdone.all() == jdone.any() else "mixed",
                     "harl_truncated": bool(truncated.all()), "contacts": contacts})
    return {"rows": rows, "obs_max": max(r["obs"] for r in rows), "rew_max": max(r["rew"] for r in rows),
            "jax_end": next((r["step"] for r in rows if r["jax_done"] is True), None),
            "harl_end": next((r["step"] for r in rows if r["harl_truncated"]), None)}


def part_step_by_step(args: argparse.Namespace) -> None:
    print("\n## 1. Step by step: same initial worlds, same actions, no reset "
          f"({args.worlds} worlds, {LIMIT + 1} steps)\n")
    print("| JaxMARL dtype | harl precision | policy | max |obs diff| | max |reward diff| (per agent) "
          "| JaxMARL done first at step | harl truncated first at step |")
    print("|---|---|---|---|---|---|---|")
    detail = None
    for x64, precision in ((False, "float32"), (False, "float64"), (True, "float64")):
        jax.config.update("jax_enable_x64", x64)
        for policy in POLICIES:
            out = step_by_step(args.worlds, args.seed, precision, policy)
            print(f"| {'float64 (x64)' if x64 else 'float32'} | {precision} | {policy} | {out['obs_max']:.3g} "
                  f"| {out['rew_max']:.3g} | {out['jax_end']} | {out['harl_end']} |")
            if x64 is False and precision == "float64" and policy == "random":
                detail = out
    jax.config.update("jax_enable_x64", False)
    assert detail is not None
    print("\nPer step, JaxMARL float32 against harl float64, random actions "
          "(contacts: worlds with two agents closer than 0.3):\n")
    print("| step | max |obs diff| | max |reward diff| | JaxMARL done | harl truncated | contacts |")
    print("|---|---|---|---|---|---|")
    for r in detail["rows"]:
        print(f"| {r['step']} | {r['obs']:.3g} | {r['rew']:.3g} | {r['jax_done']} | {r['harl_truncated']} "
              f"| {r['contacts']} |")


# ----------------------------------------------------------------------------- 2. return distributions

def jax_returns(policy: str, episodes: int, seed: int, first_action: int | None = None,
                chunk: int = 1000) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """JaxMARL episodes run to its own ``done``: team returns over the whole episode and over its
    first 25 steps, and each step's mean team reward (``first_action``: overrides every agent's first action)."""
    jx = Jax()
    rng = np.random.default_rng(seed)
    key = jax.random.PRNGKey(seed)
    whole, first25, per_step = [], [], []
    for start in range(0, episodes, chunk):
        b = min(chunk, episodes - start)
        key, k = jax.random.split(key)
        obs, state = jx.reset(k, b)
        total, t, done, steps = np.zeros(b), 0, False, []
        while not done:
            actions = act(policy, obs.astype(np.float64), rng)
            if t == 0 and first_action is not None:
                actions[:] = first_action
            key, k = jax.random.split(key)
            obs, state, rew, jdone = jx.step(k, state, actions)
            t += 1
            team = rew.astype(np.float64).sum(1)
            steps.append(team)
            total += team
            if t == LIMIT:
                first25.append(total.copy())
            done = bool(jdone.all())
            assert done == bool(jdone.any())
        whole.append(total)
        per_step.append(np.stack(steps, 1))
    return np.concatenate(whole), np.concatenate(first25), np.concatenate(per_step).mean(0)


def harl_returns(policy: str, episodes: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """harl's episodes (``team_reward = true``, float64 as the pipelines): the ``return`` of its episode
    infos (what ``train_return`` averages) and each step's mean team reward."""
    venv = harl_env(episodes, "float64", team_reward=True, seed=seed)
    obs, _, _ = venv.reset(seed)
    rng = np.random.default_rng(seed)
    steps = []
    for _ in range(LIMIT):
        step = venv.step(harl_actions(act(policy, harl_obs(obs), rng)))
        steps.append(step.rewards[:, 0].double().numpy())  # every agent holds the team's sum
        obs = step.obs
    infos = step.episode_infos
    assert len(infos) == episodes and all(i["length"] == LIMIT for i in infos)
    returns = np.array([i["return"] for i in infos])
    np.testing.assert_allclose(returns, np.stack(steps, 1).sum(1), rtol=1e-5)
    return returns, np.stack(steps, 1).mean(0)


def _ms(x: np.ndarray) -> str:
    return f"{x.mean():.2f} ± {x.std():.2f} (s.e. {x.std() / np.sqrt(len(x)):.2f})"


def part_returns(args: argparse.Namespace) -> None:
    print(f"\n## 2. Team-return distributions, {args.episodes} episodes per policy and env "
          "(mean ± std, standard error)\n")
    print("| policy | JaxMARL, its whole episode | JaxMARL, first 25 steps | harl (25 steps) "
          "| JaxMARL whole - harl | JaxMARL 26th step's mean reward |")
    print("|---|---|---|---|---|---|")
    curves = {}
    for policy in POLICIES:
        whole, first25, jcurve = jax_returns(policy, args.episodes, args.seed + 1)
        ours, hcurve = harl_returns(policy, args.episodes, args.seed + 2)
        curves[policy] = (jcurve, hcurve)
        print(f"| {policy} | {_ms(whole)} (length {len(jcurve)}) | {_ms(first25)} | {_ms(ours)} "
              f"| {whole.mean() - ours.mean():+.2f} | {jcurve[-1]:.2f} |")
    print("\nMean team reward per step (JaxMARL / harl):\n")
    print("| step | " + " | ".join(POLICIES) + " |\n|---|" + "---|" * len(POLICIES))
    for t in range(LIMIT + 1):
        cells = []
        for policy in POLICIES:
            jcurve, hcurve = curves[policy]
            cells.append(f"{jcurve[t]:.3f} / " + (f"{hcurve[t]:.3f}" if t < len(hcurve) else "-"))
        print(f"| {t + 1} | " + " | ".join(cells) + " |")


# ----------------------------------------------------------------------------- 3. the logged metric

def jax_logged(policy: str, n_envs: int, n_steps: int, updates: int, seed: int) -> dict:
    """JaxMARL's logged ``returned_episode_returns`` per update, as ``ippo_ff_mpe.py`` and
    ``pqn_vdn_ff.py`` compute it (the info's mean over steps, agents and envs), beside the mean of the
    team returns of the episodes that ended in the same update (harl's definition, on JaxMARL's env)."""
    from jaxmarl.wrappers.baselines import MPELogWrapper

    env = MPELogWrapper(SimpleSpreadMPE(num_agents=N, num_landmarks=N, local_ratio=0.5))
    agents = env._env.agents
    reset = jax.jit(jax.vmap(env.reset))
    step = jax.jit(jax.vmap(env.step))
    key = jax.random.PRNGKey(seed)
    key, k = jax.random.split(key)
    obs, state = reset(jax.random.split(k, n_envs))
    rng = np.random.default_rng(seed)
    logged, ended_mean = [], []
    for _ in range(updates):
        held, ended = [], []
        for _ in range(n_steps):
            o = np.stack([np.asarray(obs[a]) for a in agents], 1).astype(np.float64)
            actions = act(policy, o, rng)
            key, k = jax.random.split(key)
            obs, state, _, done, info = step(jax.random.split(k, n_envs),
                                             state, {a: jnp.asarray(actions[:, i]) for i, a in enumerate(agents)})
            r = np.asarray(info["returned_episode_returns"], dtype=np.float64)  # (envs, agents)
            held.append(r)
            finished = np.asarray(info["returned_episode"])[:, 0]
            ended.extend(r[finished].mean(1).tolist())  # x num_agents per agent, mean over agents: team sum
        logged.append(float(np.mean(held)))
        ended_mean.append(float(np.mean(ended)) if ended else float("nan"))
    return {"logged": np.array(logged), "ended": np.array(ended_mean)}


def harl_logged(policy: str, n_envs: int, n_steps: int, updates: int, seed: int) -> np.ndarray:
    """harl's ``train_return`` per iteration: the mean of the returns of the episodes that ended in it."""
    venv = harl_env(n_envs, "float64", team_reward=True, seed=seed)
    obs, _, _ = venv.reset(seed)
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(updates):
        returns = []
        for _ in range(n_steps):
            step = venv.step(harl_actions(act(policy, harl_obs(obs), rng)))
            obs = step.obs
            returns.extend(i["return"] for i in step.episode_infos)
        out.append(float(np.mean(returns)) if returns else float("nan"))
    return np.array(out)


def part_metric(args: argparse.Namespace) -> None:
    try:
        import jaxmarl.wrappers.baselines  # noqa: F401
    except ImportError as e:
        print(f"\n## 3. skipped: JaxMARL's wrappers do not import ({e}); "
              "set PYTHONPATH to gymnax and distrax")
        return
    print("\n## 3. Logged training return per update, fixed policy "
          "(mean over updates ± std; first update apart)\n")
    print("| batch | policy | JaxMARL logged, update 1 | JaxMARL logged, updates 2+ | JaxMARL, mean of episodes "
          "ended in the update (2+) | harl train_return (iterations with an episode) |")
    print("|---|---|---|---|---|---|")
    for name, n_envs, n_steps, updates in (("IPPO 16 x 128", 16, 128, args.ippo_updates),
                                           ("PQN 256 x 16", 256, 16, args.pqn_updates)):
        for policy in POLICIES:
            j = jax_logged(policy, n_envs, n_steps, updates, args.seed + 3)
            h = harl_logged(policy, n_envs, n_steps, updates, args.seed + 4)
            ended = j["ended"][1:][~np.isnan(j["ended"][1:])]
            hh = h[~np.isnan(h)]
            print(f"| {name} | {policy} | {j['logged'][0]:.2f} | {j['logged'][1:].mean():.2f} ± "
                  f"{j['logged'][1:].std():.2f} | {ended.mean():.2f} ± {ended.std():.2f} | "
                  f"{hh.mean():.2f} ± {hh.std():.2f} ({len(hh)} of {updates}) |")


# ----------------------------------------------------------------------------- 4. PQN's zeroed first observation

def part_first_obs(args: argparse.Namespace) -> None:
    print(f"\n## 4. JaxMARL episode return when every agent's first action is forced "
          f"({args.episodes} episodes, JaxMARL env, 26 steps)\n")
    print("| policy | as is | first action no-op (the heuristics' choice on a zero input) | first action -x |")
    print("|---|---|---|---|")
    for policy in ("nearest", "assigned"):
        base = jax_returns(policy, args.episodes, args.seed + 5)[0]
        noop = jax_returns(policy, args.episodes, args.seed + 5, first_action=0)[0]
        left = jax_returns(policy, args.episodes, args.seed + 5, first_action=1)[0]
        print(f"| {policy} | {base.mean():.2f} | {noop.mean():.2f} ({noop.mean() - base.mean():+.2f}) | "
              f"{left.mean():.2f} ({left.mean() - base.mean():+.2f}) |")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--worlds", type=int, default=256, help="worlds in the step-by-step comparison")
    p.add_argument("--episodes", type=int, default=2000, help="episodes per policy and env in part 2 and 4")
    p.add_argument("--ippo-updates", type=int, default=40, help="16 x 128 updates in part 3")
    p.add_argument("--pqn-updates", type=int, default=80, help="256 x 16 updates in part 3")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--skip-metric", action="store_true", help="skip part 3")
    args = p.parse_args()
    part_step_by_step(args)
    part_returns(args)
    if not args.skip_metric:
        part_metric(args)
    part_first_obs(args)


if __name__ == "__main__":
    main()
