"""Off-policy gradient steps replayed through harl and through PKU-MARL/HARL's own code.

The same replay data, the same sampled transitions, the same initial networks, the same
Gaussian draws (TD3's target smoothing; SAC's reparameterised samples) and the same agent
order go through both; the script reports where the two part: the n-step targets HARL's
buffer forms from the data, then every network (and SAC's temperatures) after ``--updates``
critic steps and their actor rounds on that batch (HATD3 and HADDPG; HASAC with Box or Discrete
actions; EP state).

    # 1. harl's venv: collect, sample, take the steps, write the record
    python benchmarks/replay_off_policy.py dump PIPELINE --out replay.pt [--set KEY=VALUE ...]
    # 2. HARL's venv, from HARL's checkout root: HARL's buffer, critic, actors and runner step
    HARL-venv/bin/python ~/harl/benchmarks/replay_off_policy.py harl replay.pt CONFIG.json

``PIPELINE`` is a harl pipeline TOML (``harl convert CONFIG.json`` writes HARL's as one); the step
is HARL's ``OffPolicyHARunner.train`` itself, called on a stand-in runner that holds only what
``train`` reads.  Prints the largest absolute difference per quantity and how many entries
differ by more than 1e-5.  The targets agree to float32 rounding (about 1e-7); after the steps
a few entries per layer differ by up to a quarter of the learning rate: Adam's step is
``lr * m / (sqrt(v) + eps)``, so where a gradient entry is near zero (a ReLU unit barely
active in the batch) rounding in ``g`` moves the step by a visible fraction of ``lr``.

HASAC's draws are recorded in harl's order (the next actions, the round-start actions, then per
agent its own sample and its new action) and handed to HARL's ``Normal.rsample`` (Box) or its
Gumbel noise's ``uniform_`` (Discrete) in the same order; HARL also redraws the last agent's
action, which nothing reads.  HARL's
SquashedGaussianPolicy scales ``tanh`` by ``high[0]``: dump with ``updater.objective.squash =
"act_limit"`` (``harl convert`` sets it) for the same actions.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np
import torch

BATCH = 256


def _replayer(draws: list[tuple[str, torch.Tensor]]) -> tuple[Any, Any, Any]:
    """torch's samplers replaced: ``torch.randn_like`` and ``torch.distributions``'
    ``_standard_normal`` hand out the recorded Gaussian draws, ``Tensor.uniform_`` the recorded
    exponential ones as ``U = exp(-E)`` (HARL's Gumbel noise ``-log(-log U)`` is then harl's
    ``-log E``); each in order, a real draw where the next one's shape differs."""
    normal = [x for kind, x in draws if kind == "normal"]
    exponential = [x for kind, x in draws if kind == "exponential"]
    real_like, real_standard, real_uniform = (torch.randn_like, torch.distributions.normal._standard_normal,
                                              torch.Tensor.uniform_)

    def take(queue: list[torch.Tensor], shape: Any) -> torch.Tensor | None:
        return queue.pop(0).clone() if queue and queue[0].shape == torch.Size(shape) else None

    def randn_like(x: torch.Tensor, *args: Any, **kwargs: Any) -> torch.Tensor:
        out = take(normal, x.shape)
        return real_like(x, *args, **kwargs) if out is None else out

    def standard_normal(shape: Any, dtype: Any = None, device: Any = None) -> torch.Tensor:
        out = take(normal, shape)
        return real_standard(shape, dtype=dtype, device=device) if out is None else out

    def uniform_(self: torch.Tensor, *args: Any, **kwargs: Any) -> torch.Tensor:
        out = take(exponential, self.shape)
        if out is None:
            return real_uniform(self, *args, **kwargs)
        with torch.no_grad():
            return self.copy_(torch.exp(-out))

    return randn_like, standard_normal, uniform_


def _recorder(draws: list[tuple[str, torch.Tensor]]) -> tuple[Any, Any]:
    """``torch.randn_like`` and ``Tensor.exponential_`` that keep a copy of every draw, in order
    (TD3's smoothing noise, SAC's Gaussian samples, its Gumbel noise for categories)."""
    real_like, real_exponential = torch.randn_like, torch.Tensor.exponential_

    def randn_like(x: torch.Tensor, *args: Any, **kwargs: Any) -> torch.Tensor:
        out = real_like(x, *args, **kwargs)
        draws.append(("normal", out.detach().clone()))
        return out

    def exponential_(self: torch.Tensor, *args: Any, **kwargs: Any) -> torch.Tensor:
        out = real_exponential(self, *args, **kwargs)
        draws.append(("exponential", out.detach().clone()))
        return out

    return randn_like, exponential_


def dump(args: argparse.Namespace) -> int:
    from harl.compose import build_stages
    from harl.config.loading import load_spec_and_notes
    from harl.update import off_policy as updater_module

    spec, _ = load_spec_and_notes(Path(args.pipeline), ["collector.warmup_steps=1000", "collector.n_envs=10",
                                                  "run.torch_threads=1", *args.set])
    torch.manual_seed(0)
    s = build_stages(spec)
    while s.buffer.env_steps < args.steps:
        s.collector.collect(s.buffer)
    b = s.buffer
    index = b.sample_index(BATCH, torch.Generator().manual_seed(1))
    batch = s.returns.batch(b, index)
    oldest = b.head if b.filled == b.rows else 0
    rows = [(oldest + r) % b.rows for r in range(b.filled)]  # oldest first

    def series(x: torch.Tensor) -> torch.Tensor:  # tensors, not numpy: HARL's venv has numpy 1.x
        return x[rows].reshape(len(rows) * b.n_envs, *x.shape[2:]).clone()

    team, critic = s.team, s.critic
    n = team.n_agents
    if not all(type(sp).__name__ in ("Box", "Discrete") for sp in s.venv.action_spaces):
        raise SystemExit("this replay covers Box and Discrete action spaces")
    sac = hasattr(s.updater.learners[0], "log_alpha")

    def weights() -> dict[str, Any]:  # copies: a state_dict shares the parameters' storage
        def copy(module: Any) -> dict[str, torch.Tensor]:
            return {k: v.detach().clone() for k, v in module.state_dict().items()}

        out = {"actors": [copy(a) for a in team.actors], "critic": copy(critic.nets),
               "critic_targets": copy(critic.targets)}
        if team.targets is not None:
            out["targets"] = [copy(t) for t in team.targets]
        if sac:  # the agents' temperatures and the critic's
            out["log_alpha"] = [learner.log_alpha.detach().clone() for learner in s.updater.learners]
            temperature = s.updater.learners[0].critic_temp
            out["critic_log_alpha"] = None if temperature is None else temperature.log_alpha.detach().clone()
        return out

    record: dict[str, Any] = {
        "n_envs": b.n_envs, "index": index.clone(), "gamma": s.returns.config.gamma, "n_step": s.returns.config.n_step,
        "obs": [series(o) for o in b.obs], "next_obs": [series(o) for o in b.next_obs],
        "actions": [series(a) for a in b.actions], "state": series(b.state), "next_state": series(b.next_state),
        "rewards": series(b.rewards), "terminated": series(b.terminated), "truncated": series(b.truncated),
        "returns": batch.returns.mean(-1), "discount": batch.discount, "batch_next_state": batch.next_state,
        "before": weights(),
        "noise": [], "updates": args.updates,
        "action_spaces": [{"n": int(sp.n)} if hasattr(sp, "n") else {"low": torch.as_tensor(sp.low).clone(),
                                                                   "high": torch.as_tensor(sp.high).clone()}
                          for sp in s.venv.action_spaces],
        "order": [n - 1, *range(n - 1)],  # not the identity: [1, 0], [2, 0, 1], ...
    }
    u = s.updater
    u.steps = u.policy_freq - 1  # this step updates the actors too
    real_sample, real_order, real_randn = u.returns.sample, updater_module.agent_order, torch.randn_like
    real_exponential = torch.Tensor.exponential_
    u.returns.sample = lambda *a, **k: batch
    updater_module.agent_order = lambda *a, **k: list(record["order"])
    torch.randn_like, torch.Tensor.exponential_ = _recorder(record["noise"])
    try:
        u._gradient_steps(b, [], [[] for _ in range(n)], args.updates)
    finally:
        u.returns.sample, updater_module.agent_order, torch.randn_like = real_sample, real_order, real_randn
        torch.Tensor.exponential_ = real_exponential
    record["after"] = weights()
    torch.save(record, args.out)
    print(f"wrote {args.out}: {b.size:,} transitions, batch of {BATCH}, {args.updates} updates, "
          f"agent order {record['order']}")
    s.close()
    return 0


def _mlp_state(ours: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """harl's ``net.<j>`` Linear layers as HARL's ``pi.mlp.<j>``."""
    return {f"pi.mlp.{k[len('net.'):]}": v for k, v in ours.items() if k.startswith("net.")}


def _sac_state(ours: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """harl's SquashedGaussianActor (``body.<j>``, ``mu``, ``log_std``) as HARL's SquashedGaussianPolicy."""
    names = {"body.": "net.mlp.", "mu.": "mu_layer.", "log_std.": "log_std_layer."}
    return {names[p] + k[len(p):]: v for k, v in ours.items() for p in names if k.startswith(p)}


def _categorical_state(ours: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """harl's CategoricalActor (``base.body``: input LayerNorm, then Linear, ReLU, LayerNorm per layer;
    ``logits``) as HARL's StochasticMlpPolicy (``base.feature_norm``, ``base.mlp.fc``, ``act.action_out``)."""
    out = {}
    for k, v in ours.items():
        if k.startswith("logits."):
            out["act.action_out.linear." + k[len("logits."):]] = v
        elif k.startswith("base.body."):
            j, rest = k[len("base.body."):].split(".", 1)
            out[("base.feature_norm." if j == "0" else f"base.mlp.fc.{int(j) - 1}.") + rest] = v
    return out


def _q_state(stacked: dict[str, torch.Tensor], k: int) -> dict[str, torch.Tensor]:
    """Network ``k`` of harl's stacked twin critics as HARL's ``ContinuousQNet`` (``mlp.mlp.<j>``)."""
    out = {}
    layers = sorted(int(name.split(".")[1]) for name in stacked if name.startswith("weights."))
    for j in layers:
        out[f"mlp.mlp.{2 * j}.weight"] = stacked[f"weights.{j}"][k]
        out[f"mlp.mlp.{2 * j}.bias"] = stacked[f"biases.{j}"][k].reshape(-1)
    return out


def _diff(name: str, a: Any, b: Any) -> float:
    gap = np.abs(np.asarray(a, dtype=np.float64) - np.asarray(b, dtype=np.float64))
    d = float(np.max(gap))
    print(f"  {name:<44} max |harl - HARL| = {d:.3g}; entries above 1e-5: {int((gap > 1e-5).sum())} of {gap.size}")
    return d


def harl_side(args: argparse.Namespace) -> int:  # runs in HARL's venv: ``harl`` is HARL's package there
    from gym import spaces
    from harl.algorithms.actors import ALGO_REGISTRY
    from harl.algorithms.critics import CRITIC_REGISTRY
    from harl.common.buffers.off_policy_buffer_ep import OffPolicyBufferEP

    from harl.runners.off_policy_ha_runner import OffPolicyHARunner

    rec = torch.load(args.record, weights_only=False)
    rec = {k: [x.numpy() for x in v] if isinstance(v, list) and v and isinstance(v[0], torch.Tensor) and k != "noise"
           else v.numpy() if isinstance(v, torch.Tensor) else v for k, v in rec.items()}
    config = json.loads(Path(args.config).read_text())
    algo_args, algo = config["algo_args"], config["main_args"]["algo"]
    E, T = rec["n_envs"], len(rec["rewards"]) // rec["n_envs"]
    n = len(rec["obs"])
    obs_spaces = [spaces.Box(-10, 10, (o.shape[1],), np.float32) for o in rec["obs"]]
    act_spaces = [spaces.Discrete(sp["n"]) if "n" in sp else spaces.Box(np.asarray(sp["low"]), np.asarray(sp["high"]),
                                                                        dtype=np.float32)
                  for sp in rec["action_spaces"]]
    avail = [np.ones((E, sp.n), np.float32) if isinstance(sp, spaces.Discrete) else None for sp in act_spaces]
    share_space = spaces.Box(-10, 10, (rec["state"].shape[1],), np.float32)
    merged = {**algo_args["train"], **algo_args["model"], **algo_args["algo"],
              "n_step": rec["n_step"], "gamma": rec["gamma"], "batch_size": BATCH, "n_rollout_threads": E,
              "buffer_size": T * E}
    buffer = OffPolicyBufferEP(merged, share_space, n, obs_spaces, act_spaces)
    for t in range(T):
        at = slice(t * E, (t + 1) * E)
        ended = rec["terminated"][at] | rec["truncated"][at]
        buffer.insert((rec["state"][at], [o[at] for o in rec["obs"]], [a[at] for a in rec["actions"]], avail,
                       rec["rewards"][at][:, :1], ended[:, None], [np.ones((E, 1), np.float32)] * n,
                       rec["terminated"][at][:, None], rec["next_state"][at], [o[at] for o in rec["next_obs"]], avail))
    index = torch.as_tensor(rec["index"])
    rest = torch.as_tensor(np.setdiff1d(np.arange(T * E), rec["index"]))
    real_randperm = torch.randperm

    def same_batch(size: int, *args: Any, **kwargs: Any) -> torch.Tensor:  # HARL takes the first batch_size
        return torch.cat([index, rest])

    torch.randperm = same_batch
    try:
        data = buffer.sample()
    finally:
        torch.randperm = real_randperm
    print("n-step targets from HARL's buffer (OffPolicyBufferEP.sample) against harl's (returns.n_step):")
    _diff("reward sums", data[4].reshape(-1), rec["returns"])
    _diff("bootstrap discount gamma^m (1 - term)", (data[11] * (1 - data[7])).reshape(-1), rec["discount"])
    _diff("bootstrap state", data[8], rec["batch_next_state"])

    actors = [ALGO_REGISTRY[algo]({**algo_args["model"], **algo_args["algo"]}, obs_spaces[i], act_spaces[i])
              for i in range(n)]
    critic = CRITIC_REGISTRY[algo](merged, share_space, act_spaces, n, "EP")
    before = rec["before"]
    sac = algo == "hasac"

    def actor_state(i: int, state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        return (_categorical_state if isinstance(act_spaces[i], spaces.Discrete) else _sac_state if sac
                else _mlp_state)(state)

    for i, actor in enumerate(actors):
        actor.actor.load_state_dict(actor_state(i, before["actors"][i]))
        if not sac:
            actor.target_actor.load_state_dict(_mlp_state(before["targets"][i]))
    for net, target, k in ((critic.critic, critic.target_critic, 0), (critic.critic2, critic.target_critic2, 1)):
        net.load_state_dict(_q_state(before["critic"], k))
        target.load_state_dict(_q_state(before["critic_targets"], k))

    class Runner:  # what OffPolicyHARunner.train reads
        pass

    runner = Runner()
    runner.__dict__.update(total_it=int(algo_args["algo"].get("policy_freq", 1)) - 1, buffer=buffer,
                           args={"algo": algo}, algo_args=algo_args, critic=critic, actor=actors, num_agents=n,
                           fixed_order=False, policy_freq=int(algo_args["algo"].get("policy_freq", 1)),
                           state_type="EP", device=torch.device("cpu"), value_normalizer=None)
    if sac:  # HARL's base runner's temperatures (auto_alpha), from harl's values before the step
        if (algo_args["train"].get("use_valuenorm") or not algo_args["algo"]["auto_alpha"]
                or before["critic_log_alpha"] is None):
            raise SystemExit("this replay covers HASAC with auto_alpha, without use_valuenorm and with HARL's "
                             'critic temperature (critic_alpha = "separate")')
        runner.target_entropy = [-np.prod(sp.shape) if isinstance(sp, spaces.Box) else -0.98 * np.log(1.0 / np.prod(sp.shape))
                                 for sp in act_spaces]
        runner.log_alpha = [torch.as_tensor(a).float().clone().reshape(1).requires_grad_() for a in before["log_alpha"]]
        runner.alpha_optimizer = [torch.optim.Adam([a], lr=algo_args["algo"]["alpha_lr"]) for a in runner.log_alpha]
        runner.alpha = [a.detach().exp() for a in runner.log_alpha]
        with torch.no_grad():
            critic.log_alpha.copy_(torch.as_tensor(before["critic_log_alpha"]).reshape(1))
        critic.alpha = critic.log_alpha.detach().exp()
    real_perm, real_randn = np.random.permutation, torch.randn_like
    real_standard, real_uniform = torch.distributions.normal._standard_normal, torch.Tensor.uniform_
    np.random.permutation = lambda m: np.array(rec["order"])
    torch.randperm = same_batch
    draws = rec["noise"]
    if sac:  # per step harl draws 4n - 1 times; HARL also redraws the last agent's action, which nothing reads
        per = 4 * n - 1
        draws = [d for k in range(0, len(draws), per)
                 for d in [*draws[k:k + per], (draws[k][0], torch.ones_like(draws[k][1]))]]
    torch.randn_like, torch.distributions.normal._standard_normal, torch.Tensor.uniform_ = _replayer(draws)
    try:
        for _ in range(rec["updates"]):
            OffPolicyHARunner.train(runner)
    finally:
        np.random.permutation, torch.randperm, torch.randn_like = real_perm, real_randperm, real_randn
        torch.distributions.normal._standard_normal, torch.Tensor.uniform_ = real_standard, real_uniform
    print(f"after {rec['updates']} critic steps and their actor rounds (order {rec['order']}):")
    after = rec["after"]
    worst = 0.0
    for k, (net, target) in enumerate(((critic.critic, critic.target_critic), (critic.critic2, critic.target_critic2))):
        for name, value in _q_state(after["critic"], k).items():
            worst = max(worst, _diff(f"critic {k + 1} {name}", value, net.state_dict()[name]))
        for name, value in _q_state(after["critic_targets"], k).items():
            worst = max(worst, _diff(f"target critic {k + 1} {name}", value, target.state_dict()[name]))
    for i, actor in enumerate(actors):
        for name, value in actor_state(i, after["actors"][i]).items():
            worst = max(worst, _diff(f"actor {i} {name}", value, actor.actor.state_dict()[name]))
        if sac:
            worst = max(worst, _diff(f"log alpha of agent {i}", after["log_alpha"][i], runner.log_alpha[i].detach()))
            continue
        for name, value in _mlp_state(after["targets"][i]).items():
            worst = max(worst, _diff(f"target actor {i} {name}", value, actor.target_actor.state_dict()[name]))
    if sac:
        worst = max(worst, _diff("critic's log alpha", after["critic_log_alpha"], critic.log_alpha.detach()))
    print(f"largest difference over every network: {worst:.3g}")
    return 0


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="command", required=True)
    d = sub.add_parser("dump")
    d.add_argument("pipeline")
    d.add_argument("--out", default="replay.pt")
    d.add_argument("--steps", type=int, default=3000, help="env steps collected before sampling")
    d.add_argument("--updates", type=int, default=2,
                   help="gradient steps on the batch; Adam's first step is about lr * sign(g), its second weighs g")
    d.add_argument("--set", action="append", default=[])
    h = sub.add_parser("harl")
    h.add_argument("record")
    h.add_argument("config", help="HARL's config.json of the same run (its algo, model and algo keys)")
    args = p.parse_args()
    return dump(args) if args.command == "dump" else harl_side(args)


if __name__ == "__main__":
    sys.exit(main())
