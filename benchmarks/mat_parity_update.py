"""A replayed update: one batch through MAT's own ``MATTrainer.ppo_update`` and harl's MAT update.

From the same initial weights (harl's ``MultiAgentTransformer`` from ``torch.manual_seed(seed)``,
copied into the ``MultiAgentTransformer`` PKU-MARL's code builds) and the same batch (MPE simple_spread's shapes:
3 agents, 21 observation numbers, 5 actions; some agents inactive; ratios away from 1 so that
the clip acts), both codes take ``--steps`` Adam steps on the whole batch (MAT's
``--num_mini_batch 1``: every step sees every sample, so the order of the rows is immaterial)
with MAT's MPE settings (clip 0.05, lr 7e-4, entropy 0.01, Huber delta 10, value
normalisation, clipped value loss, active masks, gradient-norm clip 10).  The script prints each
step's losses on both sides and the largest weight difference; the weights must agree to
float32 rounding::

    python benchmarks/mat_parity_update.py                 # MAT's code from /work/mat_ref (or MAT_REF)
    python benchmarks/mat_parity_update.py --steps 10 --json benchmarks/results/mat_update.json

The JSON keeps MAT's numbers (each step's losses and, per tensor, the sum of the weight changes
and of their absolute values), which ``tests/mat/test_mat_reference_update.py`` pins harl's
update to without MAT's code.

MAT's code is imported from a checkout of PKU-MARL/Multi-Agent-Transformer (``--mat-ref``);
its ``mat/__init__.py`` (which imports every env and runner: absl, wandb, gym) is skipped and
only ``mat.algorithms`` and ``mat.utils`` are loaded.  Without the checkout the script says so
and exits 0.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
import types
from argparse import Namespace
from pathlib import Path
from typing import Any

import numpy as np
import torch
from gymnasium import spaces

ROOT = Path(__file__).resolve().parent.parent
SETTINGS: dict[str, Any] = {"clip": 0.05, "lr": 7e-4, "entropy_coef": 0.01, "huber_delta": 10.0, "max_grad_norm": 10.0,
                            "value_loss_coef": 1.0, "n_block": 1, "n_embd": 64, "n_head": 1, "adam_eps": 1e-5}
N_AGENTS, OBS_DIM, N_ACTIONS = 3, 21, 5


def import_mat(mat_ref: Path) -> tuple[Any, Any]:
    """(TransformerPolicy, MATTrainer) from MAT's checkout, without ``mat/__init__.py``."""
    root = mat_ref / "mat"
    if "mat" not in sys.modules:
        package = types.ModuleType("mat")
        package.__path__ = [str(root)]
        sys.modules["mat"] = package
    policy = importlib.import_module("mat.algorithms.mat.algorithm.transformer_policy")
    trainer = importlib.import_module("mat.algorithms.mat.mat_trainer")
    return policy.TransformerPolicy, trainer.MATTrainer


def mat_args() -> Namespace:
    """MAT's ``config.py`` defaults with ``scripts/train_mpe.sh``'s values (the keys its policy and trainer read)."""
    s = SETTINGS
    return Namespace(
        algorithm_name="mat", env_name="MPE", lr=s["lr"], opti_eps=s["adam_eps"], weight_decay=0.0,
        use_policy_active_masks=True, n_block=s["n_block"], n_embd=s["n_embd"], n_head=s["n_head"],
        encode_state=False, dec_actor=False, share_actor=False, clip_param=s["clip"], ppo_epoch=10,
        num_mini_batch=1, data_chunk_length=10, value_loss_coef=s["value_loss_coef"],
        entropy_coef=s["entropy_coef"], max_grad_norm=s["max_grad_norm"], huber_delta=s["huber_delta"],
        use_recurrent_policy=False, use_naive_recurrent_policy=False, use_max_grad_norm=True,
        use_clipped_value_loss=True, use_huber_loss=True, use_valuenorm=True, use_value_active_masks=True)


def harl_name(mat_name: str) -> str | None:
    """harl's parameter for one of MAT's (None: a MAT layer its MPE forward never uses)."""
    if mat_name.startswith(("encoder.state_encoder.", "decoder.obs_encoder.")):
        return None  # MAT builds a state encoder and a decoder observation encoder it never calls
    rules = [("encoder.obs_encoder.", "obs_embed."), ("encoder.ln.", "enc_ln."), ("encoder.blocks.", "encoder."),
             ("encoder.head.", "value_head."), ("decoder.action_encoder.", "action_embed."),
             ("decoder.ln.", "dec_ln."), ("decoder.blocks.", "decoder."), ("decoder.head.", "action_head.")]
    for old, new in rules:
        if mat_name.startswith(old):
            name = new + mat_name[len(old):]
            return name.replace(".attn1.", ".self_attn.").replace(".attn2.", ".cross_attn.")
    raise KeyError(f"no harl parameter for MAT's {mat_name}")


def copy_weights(ours: torch.nn.Module, mat_net: torch.nn.Module) -> None:
    """harl's initial weights into MAT's transformer (every layer MAT's forward uses)."""
    source = dict(ours.named_parameters())
    seen = set()
    with torch.no_grad():
        for name, p in mat_net.named_parameters():
            mine = harl_name(name)
            if mine is not None:
                p.copy_(source[mine])
                seen.add(mine)
    missing = set(source) - seen
    if missing:
        raise KeyError(f"harl parameters without a MAT counterpart: {sorted(missing)}")


def make_batch(policy: Any, n_steps: int, seed: int) -> dict[str, np.ndarray]:
    """A batch of ``n_steps`` env steps: observations and actions drawn at random, old log-probs
    the initial policy's own minus noise (ratios 0.7-1.4, so the clip acts), standardised
    advantages, returns on MPE's scale, old values near the initial outputs, 10 % inactive agents."""
    rng = np.random.default_rng(seed)
    obs = rng.normal(size=(n_steps, N_AGENTS, OBS_DIM)).astype(np.float32)
    actions = rng.integers(0, N_ACTIONS, size=(n_steps, N_AGENTS, 1)).astype(np.float32)
    from harl.policy.mat_decode import evaluate

    with torch.no_grad():
        logp, _, values = evaluate(policy, torch.as_tensor(obs), torch.as_tensor(actions), None)
    old_logp = logp.numpy() + rng.uniform(-0.35, 0.35, size=logp.shape).astype(np.float32)
    adv = rng.normal(size=(n_steps, N_AGENTS, 1)).astype(np.float32)
    adv = (adv - adv.mean()) / (adv.std() + 1e-5)
    returns = rng.normal(-20.0, 8.0, size=(n_steps, N_AGENTS, 1)).astype(np.float32)
    old_values = values.numpy()[..., None] + rng.normal(0.0, 0.1, size=(n_steps, N_AGENTS, 1)).astype(np.float32)
    active = (rng.random(size=(n_steps, N_AGENTS, 1)) > 0.1).astype(np.float32)
    return {"obs": obs, "actions": actions, "old_logp": old_logp.astype(np.float32), "adv": adv.astype(np.float32),
            "returns": returns, "old_values": old_values.astype(np.float32), "active": active}


def mat_sample(b: dict[str, np.ndarray]) -> tuple[Any, ...]:
    """The batch as MAT's ``feed_forward_generator_transformer`` yields it: ``(N * A, ...)`` rows."""
    n = b["obs"].shape[0] * N_AGENTS

    def flat(x: np.ndarray) -> np.ndarray:
        return x.reshape(n, -1)

    share_obs = np.repeat(b["obs"].reshape(-1, 1, N_AGENTS * OBS_DIM), N_AGENTS, 1).reshape(n, -1)
    rnn = np.zeros((n, 1, 64), np.float32)
    return (share_obs, flat(b["obs"]), rnn, rnn, flat(b["actions"]), flat(b["old_values"]), flat(b["returns"]),
            np.ones((n, 1), np.float32), flat(b["active"]), flat(b["old_logp"]), flat(b["adv"]),
            np.ones((n, N_ACTIONS), np.float32))


def harl_policy(seed: int) -> Any:
    """harl's transformer for MAT's MPE shapes, initialised from ``torch.manual_seed(seed)``."""
    from harl.policy.mat import MultiAgentTransformer

    s = SETTINGS
    torch.manual_seed(seed)
    return MultiAgentTransformer([spaces.Box(-np.inf, np.inf, (OBS_DIM,), np.float32)] * N_AGENTS,
                                 [spaces.Discrete(N_ACTIONS)] * N_AGENTS, s["n_block"], s["n_embd"], s["n_head"])


def harl_learner(policy: Any, b: dict[str, np.ndarray]) -> tuple[Any, Any, Any]:
    """harl's learner and value loss with MAT's MPE settings, and the batch as harl's TeamBatch."""
    from harl.update.mat_values import MATValuesConfig, TransformerValueLoss, TransformerValues
    from harl.update.objectives.mat import MATConfig, TeamBatch, TransformerLearner

    s = SETTINGS
    config = MATConfig(n_block=s["n_block"], n_embd=s["n_embd"], n_head=s["n_head"], clip=s["clip"], epochs=1,
                       minibatches=1, entropy_coef=s["entropy_coef"], lr=s["lr"], adam_eps=s["adam_eps"],
                       max_grad_norm=s["max_grad_norm"])
    values_config = MATValuesConfig(value_loss_coef=s["value_loss_coef"], clip_value_loss=True, value_clip=s["clip"],
                                    huber_delta=s["huber_delta"], value_norm=True)
    learner = TransformerLearner(policy, config, torch.Generator().manual_seed(0))
    value_loss = TransformerValueLoss(TransformerValues(policy, values_config), values_config)
    t = {k: torch.as_tensor(v) for k, v in b.items()}
    batch = TeamBatch(t["obs"], t["actions"], t["old_logp"], torch.ones(*t["obs"].shape[:2], N_ACTIONS),
                      t["active"][..., 0], t["adv"][..., 0], t["old_values"][..., 0], t["returns"][..., 0])
    return learner, value_loss, batch


def harl_steps(seed: int, n_steps: int, steps: int) -> tuple[Any, dict[str, torch.Tensor], list[Any]]:
    """harl's side alone: (policy after ``steps`` updates, its initial weights, each step's stats)."""
    policy = harl_policy(seed)
    initial = {k: v.detach().clone() for k, v in policy.named_parameters()}
    batch = make_batch(policy, n_steps, seed)
    learner, value_loss, team_batch = harl_learner(policy, batch)
    policy.train()
    stats = [learner.update(team_batch, value_loss, SETTINGS["value_loss_coef"]) for _ in range(steps)]
    return policy, initial, stats


def fingerprint(after: dict[str, torch.Tensor], before: dict[str, torch.Tensor]) -> dict[str, list[float]]:
    """Per tensor: the sum of the weight changes and the sum of their absolute values."""
    return {k: [float((after[k] - before[k]).double().sum()), float((after[k] - before[k]).double().abs().sum())]
            for k in sorted(after)}


def mat_side(mat_ref: Path, ours: Any) -> tuple[Any, Any]:
    """MAT's policy and trainer at MAT's settings, the transformer holding ``ours``' weights."""
    transformer_policy_cls, trainer_cls = import_mat(mat_ref)
    args = mat_args()
    obs_space = spaces.Box(-np.inf, np.inf, (OBS_DIM,), np.float32)
    share_space = spaces.Box(-np.inf, np.inf, (OBS_DIM * N_AGENTS,), np.float32)
    mat_policy = transformer_policy_cls(args, obs_space, share_space, spaces.Discrete(N_ACTIONS), N_AGENTS)
    trainer = trainer_cls(args, mat_policy, N_AGENTS)
    copy_weights(ours, mat_policy.transformer)
    return mat_policy, trainer


def replay(mat_ref: Path, steps: int, n_steps: int, seed: int) -> dict[str, Any]:
    ours = harl_policy(seed)
    initial = {k: v.detach().clone() for k, v in ours.named_parameters()}
    batch = make_batch(ours, n_steps, seed)
    learner, value_loss, team_batch = harl_learner(ours, batch)
    mat_policy, trainer = mat_side(mat_ref, ours)
    mat_policy.train()
    ours.train()
    pairs: dict[str, torch.Tensor] = {}
    for n, p in mat_policy.transformer.named_parameters():
        if (name := harl_name(n)) is not None:
            pairs[name] = p
    mine = dict(ours.named_parameters())
    history = []
    for step in range(steps):
        v_mat, _, pl_mat, ent_mat, norm_mat, _ = trainer.ppo_update(mat_sample(batch))
        stats = learner.update(team_batch, value_loss, SETTINGS["value_loss_coef"])
        with torch.no_grad():
            diff = max(float((pairs[k] - mine[k]).abs().max()) for k in pairs)
            change = max(float((pairs[k] - initial[k]).abs().max()) for k in pairs)
            mat_weights = {k: p.detach().clone() for k, p in pairs.items()}
        history.append({
            "step": step + 1, "max_abs_weight_diff": diff, "max_abs_weight_change": change,
            "mat": {"policy_loss": float(pl_mat.detach()), "value_loss": float(v_mat.detach()), "entropy": float(ent_mat.detach()),
                    "grad_norm": float(norm_mat)},
            "harl": {"policy_loss": stats.policy_loss, "value_loss": stats.value_loss, "entropy": stats.entropy,
                     "grad_norm": stats.grad_norm},
            "mat_weight_change": fingerprint(mat_weights, initial)})
    return {"settings": SETTINGS, "batch_env_steps": n_steps, "seed": seed, "torch": torch.__version__,
            "steps": history}


def time_updates(mat_ref: Path, rounds: int, epochs: int, n_steps: int, seed: int) -> dict[str, Any]:
    """Seconds of one iteration's update (``epochs`` steps on a ``n_steps`` batch) through each
    code, interleaved round by round (MAT first in even rounds), one torch thread."""
    import subprocess
    import time

    ours = harl_policy(seed)
    batch = make_batch(ours, n_steps, seed)
    learner, value_loss, team_batch = harl_learner(ours, batch)
    _, trainer = mat_side(mat_ref, ours)

    def mat_update() -> None:
        for _ in range(epochs):  # MAT's train(): ppo_epoch x one minibatch of the whole buffer
            trainer.ppo_update(mat_sample(batch))

    def harl_update() -> None:
        for _ in range(epochs):
            learner.update(team_batch, value_loss, SETTINGS["value_loss_coef"])

    records = []
    for rnd in range(rounds):
        for side, fn in (("mat", mat_update), ("harl", harl_update))[:: 1 if rnd % 2 == 0 else -1]:
            load = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
            start = time.perf_counter()
            fn()
            records.append({"round": rnd, "side": side, "seconds": time.perf_counter() - start, "uptime": load})
            print(json.dumps(records[-1]), flush=True)
    return {"epochs": epochs, "batch_env_steps": n_steps, "records": records}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--mat-ref", type=Path, default=Path(os.environ.get("MAT_REF", "/work/mat_ref")))
    p.add_argument("--steps", type=int, default=1, help="Adam steps on the batch (MAT's epochs with 1 minibatch)")
    p.add_argument("--batch", type=int, default=3200, help="env steps in the batch (MAT's MPE: 128 x 25)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--json", type=Path, help="write the per-step record here")
    p.add_argument("--time-rounds", type=int, default=0,
                   help="instead: time one iteration's update (10 epochs) through each code, this many rounds")
    args = p.parse_args()
    if not (args.mat_ref / "mat" / "algorithms" / "mat" / "mat_trainer.py").is_file():
        print(f"skipped: no MAT checkout at {args.mat_ref} (git archive PKU-MARL/Multi-Agent-Transformer there)")
        return 0
    torch.set_num_threads(1)
    if args.time_rounds:
        timing = time_updates(args.mat_ref, args.time_rounds, 10, args.batch, args.seed)
        if args.json:
            args.json.parent.mkdir(parents=True, exist_ok=True)
            args.json.write_text(json.dumps(timing, indent=1) + "\n", encoding="utf-8")
        return 0
    result = replay(args.mat_ref, args.steps, args.batch, args.seed)
    for row in result["steps"]:
        m, h = row["mat"], row["harl"]
        print(f"step {row['step']}: max |w_MAT - w_harl| = {row['max_abs_weight_diff']:.2e} "
              f"(largest change {row['max_abs_weight_change']:.2e}); policy loss {m['policy_loss']:.7f} / {h['policy_loss']:.7f}, "
              f"value loss {m['value_loss']:.7f} / {h['value_loss']:.7f}, entropy {m['entropy']:.7f} / "
              f"{h['entropy']:.7f}, grad norm {m['grad_norm']:.6f} / {h['grad_norm']:.6f}")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
