"""The composition root: a PipelineSpec becomes Stages, on- and off-policy alike.

This is the only place that builds stages.  Which class a kind builds is the registry's
business (``harl.registry``; each family's updater too); what one stage needs from another
table comes from ``harl.config.checks.wiring``.  Every stage gets its parts through its
constructor.

Words: the *team* is the agents' actors (one ``nn.Module``); a *learner* is one agent's
objective-driven updater of its actor; the *critic* is the value network and the *critic
learner* what fits it.
"""

from __future__ import annotations

import random
from typing import Any

import attrs
import numpy as np
import torch

from harl import registry
from harl.buffers.replay import ReplayBuffer
from harl.config.checks import Wiring, wiring
from harl.config.spec import PipelineSpec
from harl.envs.protocol import VectorEnv
from harl.envs.registry import make_env, vector_factory
from harl.envs.vector import make_vector_env
from harl.errors import ConfigError
from harl.evaluator import Evaluator
from harl.nets.cnn import CNNBase, PlainCNN
from harl.policy.on_policy import stochastic_team
from harl.protocols import Buffer, Collector, ReturnComputer, Updater
from harl.sizes import allocating, check_env_count, human, replay_bytes_per_transition, rollout_bytes_per_step


def resolve_device(name: str, source: str = "pipeline") -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name.startswith("cuda") and not torch.cuda.is_available():
        raise ConfigError(
            f'{source}: run.device: "{name}" was asked for, but this torch build ({torch.__version__}) '
            'sees no CUDA device; use device = "auto" (picks the CPU here) or "cpu"'
        )
    return torch.device(name)


def capped_threads(threads: int, source: str = "pipeline") -> tuple[int, list[str]]:
    """``[run] torch_threads``, at most the cores this process may use (more only slows torch down),
    and a one-line note when it was capped."""
    import os

    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    if threads <= cores:
        return threads, []
    return cores, [f"{source}: run.torch_threads = {threads} is more threads than this machine's {cores} "
                   f"core{'s' if cores > 1 else ''}; using {cores}"]


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


@attrs.define
class Stages:
    """Every built stage of one pipeline; the Trainer runs them, a checkpoint saves them.

    A context manager: ``with build_stages(spec) as stages: ...`` closes every env it opened.
    """

    venv: VectorEnv
    eval_venv: VectorEnv
    team: torch.nn.Module
    """The agents' actors (``OnPolicyTeam`` or ``OffPolicyTeam``)."""
    critic: torch.nn.Module
    """The critic network (its learner is inside the updater)."""
    buffer: Buffer
    collector: Collector
    returns: ReturnComputer
    updater: Updater
    evaluator: Evaluator
    device: torch.device
    save_buffer: bool = False
    """``[checkpoint] replay_buffer``: also save the buffer's contents (it can hold gigabytes)."""
    spec: PipelineSpec | None = None
    """The pipeline these stages were built from (``describe`` reads its kinds and settings)."""
    notes: list[str] = attrs.field(factory=list)
    """What building changed of the pipeline's asks (more torch threads than cores: capped), one line each."""

    STATEFUL = (("policy", "team"), ("critic", "critic"), ("updater", "updater"), ("collector", "collector"),
                ("evaluator", "evaluator"))
    """(checkpoint key, slot) of the stages whose ``state_dict()`` a checkpoint holds: networks and
    optimisers, the collector's episode starts and the evaluator's env RNG states, so a resumed run
    continues exactly.  The buffer only with ``save_buffer``: without it a resumed off-policy run
    refills it, and updates wait until it holds more than ``warmup_steps``.  The team's key stays
    ``policy`` so older checkpoints load."""

    @property
    def policy(self) -> torch.nn.Module:
        """The team (its older name)."""
        return self.team

    def __enter__(self) -> Stages:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def state_dict(self) -> dict[str, Any]:
        """What a checkpoint holds of the stages (the Trainer adds counters and RNG states)."""
        state = {key: stage.state_dict() for key, name in self.STATEFUL
                 if hasattr(stage := getattr(self, name), "state_dict")}
        if self.save_buffer:
            state["buffer"] = self.buffer.state_dict()  # type: ignore[attr-defined]
        return state

    def load_state_dict(self, state: dict[str, Any], networks_only: bool = False) -> None:
        """Restore ``state_dict()``; slots missing from ``state`` (older checkpoints) keep their state.

        ``networks_only``: just the team and critic (to evaluate or render a checkpoint).
        """
        self.team.load_state_dict(state["policy"])
        self.critic.load_state_dict(state["critic"])
        if networks_only:
            return
        for key, name in (*self.STATEFUL[2:], ("buffer", "buffer")):
            stage = getattr(self, name)
            if key in state and hasattr(stage, "load_state_dict"):
                stage.load_state_dict(state[key])

    def close(self) -> None:
        """Close the envs (training and evaluation) these stages own."""
        self.venv.close()
        self.eval_venv.close()

    def describe(self) -> list[tuple[str, str, str]]:
        """(slot, kind, what was built) per stage: the rows of ``harl check``'s table."""
        spec = self.spec
        if spec is None:
            raise ValueError("describe() needs the spec these stages were built from (build_stages sets it)")
        venv, kind = self.venv, registry.kind_name
        settings = {slot: ", ".join(f"{k}={v}" for k, v in attrs.asdict(config, recurse=False).items()
                                    if k not in ("kind", "objective"))  # whole: the table wraps, never cuts
                    for slot, config in (("buffer", spec.buffer), ("returns", spec.returns))}
        first_env = next(iter(getattr(self.eval_venv, "envs", ())), None)
        state = getattr(first_env, "summary", f"state {tuple(venv.state_space.shape)}")  # an env's own words
        memory = _replay_memory(spec, venv) if isinstance(self.buffer, ReplayBuffer) else _rollout_memory(self)
        n_actor = sum(p.numel() for p in self.team.parameters())
        return [
            ("env", kind(spec.env), f"{venv.n_agents} agents, {venv.n_envs} envs, {state}"),
            ("collector", kind(spec.collector), f"{self.collector.steps_per_iteration:,} env steps per iteration"),
            ("buffer", kind(spec.buffer), memory or settings["buffer"] or type(self.buffer).__name__),
            ("returns", kind(spec.returns), settings["returns"]),
            ("critic", kind(spec.critic), f"{_encoders(self.critic)} encoder, "
             f"{sum(p.numel() for p in self.critic.parameters()):,} parameters"),
            ("updater", kind(spec.updater), f"objective {kind(spec.updater.objective)}"),
            ("policy", _encoders(self.team), f"{len(self.team.actors)} actor(s), {n_actor:,} parameters, "  # type: ignore[arg-type]
             f"device {self.device}"),
            ("evaluator", "-", f"{spec.evaluator.episodes} episodes every {spec.evaluator.every_iterations} iterations"),
        ]


def _encoders(module: torch.nn.Module) -> str:
    """What reads the inputs of ``module``'s networks: cnn (an image encoder is among them) or mlp."""
    return "cnn" if any(isinstance(m, (CNNBase, PlainCNN)) for m in module.modules()) else "mlp"


def _rollout_memory(stages: Stages) -> str:
    """The rollout buffer's row: bytes per env step (uint8 images count 1 byte a value)."""
    venv, buffer = stages.venv, stages.buffer
    if not hasattr(buffer, "fp_state"):
        return ""
    per = rollout_bytes_per_step(venv.observation_spaces, venv.action_spaces, int(np.prod(venv.state_space.shape)),
                                 buffer.fp_state, stages.team.hidden_size, stages.critic.hidden_size,  # type: ignore[arg-type]
                                 venv.state_space)
    return f"{per:,} bytes per env step, {buffer.length} x {buffer.n_envs} steps"  # type: ignore[attr-defined]


def _replay_memory(spec: PipelineSpec, venv: VectorEnv) -> str:
    """The replay buffer's row: capacity, batch and memory once full."""
    per = replay_bytes_per_transition(venv.observation_spaces, venv.action_spaces,
                                      int(np.prod(venv.state_space.shape)), venv.state_space)
    capacity = spec.buffer.capacity
    return (f"capacity {capacity:,}, batch {spec.buffer.batch_size}; memory when full: {per:,} bytes per "
            f"transition x {capacity:,} = {human(per * capacity)}")


def _build(config: Any, parts: registry.Parts, *extra: Any) -> Any:
    """The stage of ``config``'s kind, once it has what its slot's callers use (users' are checked)."""
    entry = registry.entry_of(config)
    stage = entry.factory(config, parts, *extra)  # type: ignore[misc]
    registry.check_protocol(entry, stage, f"{parts.source}: {entry.slot}.kind")
    return stage


def build_stages(spec: PipelineSpec, source: str = "pipeline", venv: Any = None, eval_venv: Any = None) -> Stages:
    """Build every stage of ``spec``.  Close the result when done.

    ``venv`` / ``eval_venv``: pre-built vector envs (a test's fakes) instead of ``[env]``'s;
    the Stages own and close them.  ``source`` names the pipeline file in errors.
    """
    run, col = spec.run, spec.collector
    opened: list[Any] = []
    try:
        device = resolve_device(run.device, source)
        notes: list[str] = []
        if run.torch_threads > 0:
            threads, notes = capped_threads(run.torch_threads, source)
            torch.set_num_threads(threads)
        seed_everything(run.seed)
        w = wiring(spec)
        if venv is None:  # sizes checked against the memory available before anything is allocated
            check_env_count(lambda: make_env(spec.env), w.n_envs, spec.evaluator.n_envs,
                            vector_factory(spec.env) is not None, source)
        with allocating("the environments and buffers", source):
            if venv is None:
                venv = make_vector_env(spec.env, col.n_envs, col.backend, col.workers, seed=run.seed * 1000,
                                       restart_workers=col.restart_workers, step_timeout_s=col.step_timeout_s)
            opened.append(venv)
            if eval_venv is None:
                eval_venv = make_vector_env(spec.env, spec.evaluator.n_envs, "inline", seed=run.seed * 1000 + 500)
            opened.append(eval_venv)
            stages = _compose(spec, source, venv, eval_venv, device, w)
            stages.notes = notes
            return stages
    except BaseException:
        for env in opened:
            env.close()
        raise


def _compose(spec: PipelineSpec, source: str, venv: Any, eval_venv: Any, device: torch.device,
             w: Wiring) -> Stages:
    run = spec.run
    objective = spec.updater.objective
    parts = registry.Parts(list(venv.observation_spaces), list(venv.action_spaces),
                           int(np.prod(venv.state_space.shape)), venv.n_agents, venv, device,
                           torch.Generator().manual_seed(run.seed), run.seed * 1000, spec.policy, w, source,
                           venv.state_space)
    parts.team = registry.entry_of(objective).parts.get("team", stochastic_team)(objective, parts).to(device)
    parts.critic = _build(spec.critic, parts).to(device)
    parts.returns = _build(spec.returns, parts)
    learners = [_build(objective, parts, i) for i in range(len(parts.team.actors))]
    critic_learner = registry.entry_of(spec.critic).parts["learner"](parts.critic, spec.critic, parts)
    updater = registry.updater_builder(w.family)(spec.updater, learners, critic_learner, parts)
    buffer = _build(spec.buffer, parts)
    collector = _build(spec.collector, parts)
    evaluator = Evaluator(spec.evaluator, eval_venv, parts.team, device, seed=run.seed * 1000 + 500)
    return Stages(venv, eval_venv, parts.team, parts.critic, buffer, collector, parts.returns, updater,
                  evaluator, device, save_buffer=w.family == "off_policy" and spec.checkpoint.replay_buffer,
                  spec=spec)
