"""The composition root: a PipelineSpec becomes stages, and stages a Trainer.

This is the only place that knows which implementation a config selects; every stage
gets the parts it needs through its constructor.
"""

from __future__ import annotations

import random
import time
from pathlib import Path
from typing import Any

import attrs
import numpy as np
import torch

from harl.buffers.rollout import RolloutBuffer
from harl.build_off_policy import build_off_policy_stages
from harl.checkpoint import latest_checkpoint, load_checkpoint
from harl.collect.on_policy import OnPolicyCollector
from harl.envs.vector import make_vector_env
from harl.errors import CheckpointError, ConfigError
from harl.evaluate import Evaluator
from harl.logging.tensorboard import require_tensorboard
from harl.pipeline import PipelineSpec, dump_pipeline, load_pipeline, structure_pipeline
from harl.policy.actor import TeamPolicy
from harl.returns.gae import GAE
from harl.trainer import Counters, Trainer, set_rng_state
from harl.update.objectives.a2c import A2CConfig, a2c_learner
from harl.update.objectives.ppo import PPOConfig, ppo_learner
from harl.update.objectives.trpo import TRPOConfig, TRPOLearner
from harl.update.updater import OnPolicyUpdater
from harl.update.v_critic import VCritic, VCriticLearner

try:
    import tomllib
except ModuleNotFoundError:  # pragma: no cover - Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]


ON_POLICY_LEARNERS: dict[type, Any] = {PPOConfig: ppo_learner, TRPOConfig: TRPOLearner,
                                       A2CConfig: a2c_learner}
"""Objective config -> learner class (constructed as ``cls(actor, config, generator)``)."""


def resolve_device(name: str, source: str = "pipeline") -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name.startswith("cuda") and not torch.cuda.is_available():
        raise ConfigError(
            f'{source}: run.device: "{name}" was asked for, but this torch build ({torch.__version__}) '
            'sees no CUDA device; use device = "auto" (picks the CPU here) or "cpu"'
        )
    return torch.device(name)


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


@attrs.define
class Stages:
    venv: Any
    eval_venv: Any
    policy: TeamPolicy
    critic: VCritic
    buffer: RolloutBuffer
    collector: OnPolicyCollector
    returns: GAE
    updater: OnPolicyUpdater
    evaluator: Evaluator
    device: torch.device

    STATEFUL = ("policy", "critic", "updater", "collector", "buffer", "evaluator")
    """Slots whose ``state_dict()`` a checkpoint holds, when the slot's stage has one."""

    def state_dict(self) -> dict[str, Any]:
        """What a checkpoint holds of the stages (the Trainer adds counters and RNG states).

        Every stage in ``STATEFUL`` that has ``state_dict`` / ``load_state_dict`` is saved
        under its slot name: networks and optimisers, the collector's episode starts and the
        evaluator's env RNG states (so a resumed run continues exactly), and a buffer's
        contents where the buffer chooses to save them.
        """
        return {name: stage.state_dict() for name in self.STATEFUL
                if hasattr(stage := getattr(self, name), "state_dict")}

    def load_state_dict(self, state: dict[str, Any], networks_only: bool = False) -> None:
        """Restore ``state_dict()``; slots missing from ``state`` (older checkpoints) keep their state.

        ``networks_only``: just the policy and critic (to evaluate or render a checkpoint).
        """
        self.policy.load_state_dict(state["policy"])
        self.critic.load_state_dict(state["critic"])
        if networks_only:
            return
        for name in self.STATEFUL[2:]:
            stage = getattr(self, name)
            if name in state and hasattr(stage, "load_state_dict"):
                stage.load_state_dict(state[name])

    def close(self) -> None:
        self.venv.close()
        self.eval_venv.close()


def build_stages(spec: PipelineSpec, source: str = "pipeline") -> Stages:
    """Build every stage of ``spec`` (envs included).  Close the result when done.

    ``source`` names the pipeline file in errors found while building.
    """
    run = spec.run
    device = resolve_device(run.device, source)
    if run.torch_threads > 0:
        torch.set_num_threads(run.torch_threads)
    seed_everything(run.seed)
    if spec.collector.kind == "off_policy":  # replay, n-step targets, Q critics: harl.build_off_policy
        return build_off_policy_stages(spec, device, source)  # type: ignore[return-value]
    if run.precision != "fp32":
        raise ConfigError(
            f'{source}: run.precision: "{run.precision}" applies to off-policy gradient steps only; '
            'on-policy updates run in fp32: remove the key or set precision = "fp32"'
        )
    col = spec.collector
    venv = make_vector_env(spec.env, col.n_envs, col.backend, col.workers, seed=run.seed * 1000)
    try:
        eval_venv = make_vector_env(spec.env, spec.evaluator.n_envs, "inline",
                                    seed=run.seed * 1000 + 500)
        obs_spaces, act_spaces = venv.observation_spaces, venv.action_spaces
        n_agents = venv.n_agents
        state_dim = int(np.prod(venv.state_space.shape))
        policy = TeamPolicy(obs_spaces, act_spaces, spec.policy).to(device)
        critic = VCritic(state_dim, n_agents, spec.critic,  # a GRU critic with GRU actors, as in HARL
                         recurrent=spec.policy.recurrent != "none").to(device)
        generator = torch.Generator().manual_seed(run.seed)
        objective = spec.updater.objective
        learner_class = ON_POLICY_LEARNERS[type(objective)]
        learners = [learner_class(actor, objective, generator) for actor in policy.actors]
        updater = OnPolicyUpdater(spec.updater, learners,
                                  VCriticLearner(critic, spec.critic, generator), n_agents, generator)
        recurrent = spec.policy.recurrent
        buffer = RolloutBuffer(obs_spaces, act_spaces, state_dim, col.n_envs, col.rollout_length,
                               fp_state=spec.critic.state_type == "FP", device=device,
                               fp_advantage_norm=spec.buffer.fp_advantage_norm,
                               hidden_size=policy.hidden_size, critic_hidden_size=critic.hidden_size,
                               sequence_length={"none": 0, "naive": col.rollout_length,
                                                "chunked": spec.policy.chunk_length}[recurrent])
        collector = OnPolicyCollector(col, venv, policy, critic, device, seed=run.seed * 1000)
        evaluator = Evaluator(spec.evaluator, eval_venv, policy, device, seed=run.seed * 1000 + 500)
    except BaseException:
        venv.close()
        raise
    return Stages(venv, eval_venv, policy, critic, buffer, collector, GAE(spec.returns), updater,
                  evaluator, device)


def new_run_dir(spec: PipelineSpec) -> Path:
    stamp = time.strftime("%Y%m%d-%H%M%S")
    base = Path(spec.logging.dir) / f"{spec.run.name}-s{spec.run.seed}-{stamp}"
    path, n = base, 1
    while path.exists():
        n += 1
        path = base.with_name(f"{base.name}-{n}")
    path.mkdir(parents=True)
    return path


def start_run(pipeline: str | Path, overrides: list[str] = (), run_dir: Path | None = None
              ) -> tuple[Trainer, list[str]]:
    """A fresh run: validate, make the run directory, write the resolved pipeline, build."""
    spec, notes = load_pipeline(pipeline, overrides)
    if spec.logging.tensorboard:  # before the run directory exists
        require_tensorboard()
    text = dump_pipeline(spec)
    stages = build_stages(spec, str(pipeline))
    run_dir = run_dir or new_run_dir(spec)
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "pipeline.toml").write_text(text, encoding="utf-8")
    return Trainer(stages, spec, run_dir, text), notes


def spec_of_run(run_dir: Path) -> tuple[PipelineSpec, str]:
    path = run_dir / "pipeline.toml"
    if not run_dir.is_dir():
        raise CheckpointError(f"{run_dir}: no such run directory")
    if not path.is_file():
        raise CheckpointError(
            f"{run_dir}: not a harl run directory (no pipeline.toml); pass the directory that "
            "harl train printed when the run started"
        )
    text = path.read_text(encoding="utf-8")
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: malformed TOML: {exc}") from None
    return structure_pipeline(data, str(path)), text


def restore(stages: Stages, state: dict[str, Any], networks_only: bool = False) -> None:
    try:
        stages.load_state_dict(state, networks_only)
    except (KeyError, RuntimeError, ValueError) as exc:
        raise CheckpointError(
            f"the checkpoint does not fit this pipeline's networks ({str(exc).splitlines()[0]}); "
            "was the run's pipeline.toml edited after the checkpoint was written?"
        ) from None


def resume_run(run_dir: Path, checkpoint: Path | None = None) -> Trainer:
    """Continue a run from its newest (or a named) checkpoint, appending to its metrics."""
    spec, text = spec_of_run(run_dir)
    if spec.logging.tensorboard:
        require_tensorboard()
    path = checkpoint or latest_checkpoint(run_dir)
    state = load_checkpoint(path)
    stages = build_stages(spec, str(run_dir / "pipeline.toml"))
    try:
        restore(stages, state)
        set_rng_state(state["rng"])
    except BaseException:
        stages.close()
        raise
    return Trainer(stages, spec, run_dir, text, Counters(**state["counters"]))
