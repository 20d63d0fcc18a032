"""The composition root: a PipelineSpec becomes Stages, on- and off-policy alike.

This is the only place that builds stages.  Which class a kind builds is the registry's
business (``harl.registry``); what one stage needs from another table comes from
``harl.config.checks.wiring``.  Every stage gets its parts through its constructor.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import attrs
import numpy as np
import torch

from harl import registry
from harl.config.checks import Wiring, wiring
from harl.config.spec import PipelineSpec
from harl.envs.registry import make_env, vector_factory
from harl.envs.vector import make_vector_env
from harl.errors import ConfigError
from harl.evaluate import Evaluator
from harl.policy.on_policy import stochastic_team
from harl.sizes import allocating, check_env_count
from harl.update.off_policy import OffPolicyUpdater
from harl.update.on_policy import OnPolicyUpdater


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
    """Every built stage of one pipeline; the Trainer runs them, a checkpoint saves them."""

    venv: Any
    eval_venv: Any
    policy: Any
    critic: Any
    buffer: Any
    collector: Any
    returns: Any
    updater: Any
    evaluator: Any
    device: torch.device
    save_buffer: bool = False
    """``[checkpoint] replay_buffer``: also save the buffer's contents (it can hold gigabytes)."""

    STATEFUL = ("policy", "critic", "updater", "collector", "evaluator")
    """Slots whose ``state_dict()`` a checkpoint holds: networks and optimisers, the collector's
    episode starts and the evaluator's env RNG states, so a resumed run continues exactly.
    The buffer only with ``save_buffer``: without it a resumed off-policy run refills it,
    and updates wait until it holds more than ``warmup_steps``."""

    def state_dict(self) -> dict[str, Any]:
        """What a checkpoint holds of the stages (the Trainer adds counters and RNG states)."""
        state = {name: stage.state_dict() for name in self.STATEFUL
                 if hasattr(stage := getattr(self, name), "state_dict")}
        if self.save_buffer:
            state["buffer"] = self.buffer.state_dict()
        return state

    def load_state_dict(self, state: dict[str, Any], networks_only: bool = False) -> None:
        """Restore ``state_dict()``; slots missing from ``state`` (older checkpoints) keep their state.

        ``networks_only``: just the policy and critic (to evaluate or render a checkpoint).
        """
        self.policy.load_state_dict(state["policy"])
        self.critic.load_state_dict(state["critic"])
        if networks_only:
            return
        for name in (*self.STATEFUL[2:], "buffer"):
            stage = getattr(self, name)
            if name in state and hasattr(stage, "load_state_dict"):
                stage.load_state_dict(state[name])

    def close(self) -> None:
        self.venv.close()
        self.eval_venv.close()


def _on_policy_updater(spec: PipelineSpec, learners: list[Any], critic_learner: Any, parts: registry.Parts,
                       w: Wiring) -> OnPolicyUpdater:
    return OnPolicyUpdater(spec.updater, learners, critic_learner, parts.n_agents, parts.generator)


def _off_policy_updater(spec: PipelineSpec, learners: list[Any], critic_learner: Any, parts: registry.Parts,
                        w: Wiring) -> OffPolicyUpdater:
    return OffPolicyUpdater(spec.updater, learners, critic_learner, parts.returns, w.batch_size,
                            w.updates_per_round, w.warmup_steps, w.policy_freq, parts.generator,
                            spec.run.precision)


UPDATERS: dict[str, Callable[..., Any]] = {"on_policy": _on_policy_updater, "off_policy": _off_policy_updater}
"""Family -> how its updater drives the objective's learners and the critic's learner."""


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
        if run.torch_threads > 0:
            torch.set_num_threads(run.torch_threads)
        seed_everything(run.seed)
        w = wiring(spec)
        if venv is None:  # sizes checked against the memory available before anything is allocated
            check_env_count(lambda: make_env(spec.env), w.n_envs, spec.evaluator.n_envs,
                            vector_factory(spec.env) is not None, source)
        with allocating("the environments and buffers", source):
            if venv is None:
                venv = make_vector_env(spec.env, col.n_envs, col.backend, col.workers, seed=run.seed * 1000,
                                       restart_workers=col.restart_workers)
            opened.append(venv)
            if eval_venv is None:
                eval_venv = make_vector_env(spec.env, spec.evaluator.n_envs, "inline", seed=run.seed * 1000 + 500)
            opened.append(eval_venv)
            return _compose(spec, source, venv, eval_venv, device, w)
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
    updater = UPDATERS[w.family](spec, learners, critic_learner, parts, w)
    buffer = _build(spec.buffer, parts)
    collector = _build(spec.collector, parts)
    evaluator = Evaluator(spec.evaluator, eval_venv, parts.team, device, seed=run.seed * 1000 + 500)
    return Stages(venv, eval_venv, parts.team, parts.critic, buffer, collector, parts.returns, updater,
                  evaluator, device, save_buffer=w.family == "off_policy" and spec.checkpoint.replay_buffer)
