"""The composition root: a PipelineSpec becomes Stages, whatever its family.

It opens the envs, seeds, makes the ``Parts`` every factory gets (``harl.parts``), and asks the
pipeline's family (``harl.families``; the collector kind's) to build its stages in its own order; it
adds the Evaluator.  Which class a kind builds is the registry's business; what one stage
needs from another table is the family's ``wiring``.  Every stage gets its parts through its
constructor (docs/architecture.md, "Families" and "Where a new X goes").

Words: the *policy* is the agents' acting networks (one ``nn.Module``); a *learner* is one
agent's objective-driven updater of its actor; the *critic* is the network the updater fits
besides the policy (a V or Q critic, a mixer) and the *critic learner* what fits it.
"""

from __future__ import annotations

import os
import random
from typing import Any, cast

import attrs
import numpy as np
import torch

from harl import registry
from harl.collect.workers import EnvWorkers
from harl.config.checks import wiring
from harl.config.spec import PipelineSpec
from harl.envs.footprint import check_sizes
from harl.envs.protocol import VectorEnv
from harl.envs.vector import make_vector_env
from harl.errors import ConfigError, deprecated
from harl.evaluator import ActingPolicy, Evaluator
from harl.families import Family
from harl.nets.cnn import CNNBase, PlainCNN
from harl.nets.entity import EntityEncoder
from harl.parts import FamilyWiring
from harl.protocols import Buffer, Collector, ReturnComputer, Updater
from harl.sizes import allocating
from harl.team_build import build_teams, evaluation_env
from harl.teams.stages import TeamStages


def resolve_device(name: str, source: str = "pipeline") -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name.startswith("cuda") and not torch.cuda.is_available():
        raise ConfigError(
            f'{source}: run.device: "{name}" was asked for, but this torch build ({torch.__version__}) '
            'sees no CUDA device; use device = "auto" (picks the CPU here) or "cpu"'
        )
    return torch.device(name)


def usable_cores() -> int:
    """The cores this process may run on."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def capped_threads(threads: int, source: str = "pipeline") -> tuple[int, list[str]]:
    """``[run] torch_threads``, at most the cores this process may use (more only slows torch down),
    and a one-line note when it was capped."""
    cores = usable_cores()
    if threads > cores:
        return cores, [f"{source}: run.torch_threads = {threads} is more threads than this machine's {cores} "
                       f"core{'s' if cores > 1 else ''}; using {cores}"]
    return threads, []


BUSY_CORES = 0.5
"""Cores' worth of other work above which ``run.torch_threads`` threads are taken not to have their cores."""


def others_busy_cores(interval: float = 0.2) -> float | None:
    """How many cores' worth of CPU the machine spent over ``interval`` seconds while this process
    slept (``/proc/stat``; None where there is none).  Measured now: the load average lags by a
    minute and counts the work that just ended."""
    import time

    def ticks() -> tuple[int, int, int]:
        with open("/proc/stat", encoding="ascii") as f:
            lines = f.read().splitlines()
        fields = [int(x) for x in lines[0].split()[1:]]
        return sum(fields), fields[3] + fields[4], sum(line.startswith("cpu") for line in lines) - 1

    try:
        total0, idle0, cpus = ticks()
        time.sleep(interval)
        total1, idle1, _ = ticks()
    except (OSError, ValueError, IndexError):
        return None
    spent = total1 - total0
    return cpus * (spent - (idle1 - idle0)) / spent if spent > 0 else None


def busy_cores_note(threads: int, cores: int, source: str, busy: float | None = None) -> list[str]:
    """A one-line note when several torch threads start on cores other work is busy on.

    OpenMP's threads spin at each small kernel waiting for a thread that the other work has
    descheduled: measured on 2 cores beside two other jobs, one rollout of the IPPO MPE pipeline
    compiled took 26.6 s with 2 threads against 0.10 s with 1 (0.14 s with 2 threads under
    ``OMP_WAIT_POLICY=PASSIVE``, which costs ~30 % on idle cores; docs/performance.md, "Threads and
    the compiled update").  ``busy``: the other work in cores (default: ``others_busy_cores()``)."""
    if threads <= 1 or os.environ.get("OMP_WAIT_POLICY", "").upper() == "PASSIVE":
        return []
    busy = others_busy_cores() if busy is None else busy
    if busy is None or busy + threads <= cores + BUSY_CORES:
        return []
    return [f"{source}: run.torch_threads = {threads} on a busy machine ({busy:.1f} of {cores} cores busy with other "
            f"work): torch's threads spin-wait against it and can run 100x slower; set run.torch_threads = 1, or "
            f"export OMP_WAIT_POLICY=PASSIVE before harl starts (docs/performance.md, \"Threads and the compiled update\")"]


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


BACKEND_KEYS = {"backend": "inline", "workers": 0, "restart_workers": False, "step_timeout_s": None}
"""What a collector config that is not an ``EnvWorkers`` (a user family's) gets: inline envs, no timeout."""


def env_backend(collector: object) -> dict[str, Any]:
    """How the training envs run (``make_vector_env``'s options): the collector's ``[collector] backend``,
    ``workers``, ``restart_workers`` and ``step_timeout_s`` (``harl.collect.workers.EnvWorkers``)."""
    return collector.vector_options() if isinstance(collector, EnvWorkers) else dict(BACKEND_KEYS)


@attrs.define
class Stages:
    """Every built stage of one pipeline; the Trainer runs them, a checkpoint saves them.

    A context manager: ``with build_stages(spec) as stages: ...`` closes every env it opened.
    """

    venv: VectorEnv
    eval_venv: VectorEnv
    policy: torch.nn.Module
    """The agents' acting networks, ``[policy]``'s (``OnPolicyActors``, ``OffPolicyActors``,
    ``AgentQNetworks``, a family's own).  A *team* is a set of agents with stages of its own."""
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
    family: Family | None = None
    """The family that built them (``describe`` asks it for its rows)."""
    notes: list[str] = attrs.field(factory=list)
    """What building changed of the pipeline's asks (more torch threads than cores: capped), one line each."""
    teams: dict[str, TeamStages] = attrs.field(factory=dict)
    """A ``[teams]`` pipeline's stages per team (``stages.teams["predators"].policy``); {} for one team."""

    STATEFUL = (("policy", "policy"), ("critic", "critic"), ("updater", "updater"), ("collector", "collector"),
                ("evaluator", "evaluator"), ("returns", "returns"))
    """(checkpoint key, slot) of the stages whose ``state_dict()`` a checkpoint holds: networks and
    optimisers, the collector's episode starts, the evaluator's env RNG states and a returns stage's
    own state where it has one (``n_step_v``'s reward statistics), so a resumed run continues
    exactly.  The buffer only with ``save_buffer``: without it a resumed off-policy run
    refills it, and updates wait until it holds more than ``warmup_steps``."""

    @property
    def team(self) -> torch.nn.Module:
        """The policy's older name (``stages.policy``), with a ``HarlDeprecationWarning``."""
        deprecated("Stages.team", "Stages.policy")
        return self.policy

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

        ``networks_only``: just the policy and critic (to evaluate or render a checkpoint).
        """
        self.policy.load_state_dict(state["policy"])
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
        own = self.family.describe(self) if self.family is not None else {}
        first_env = next(iter(getattr(self.eval_venv, "envs", ())), None)
        state = getattr(first_env, "summary", f"state {tuple(venv.state_space.shape)}")  # an env's own words
        n_actor = sum(p.numel() for p in self.policy.parameters())
        n_actors = len(getattr(self.policy, "actors", ())) or venv.n_agents
        return [
            ("env", kind(spec.env), f"{venv.n_agents} agents, {venv.n_envs} envs, {state}"),
            ("collector", kind(spec.collector), f"{self.collector.steps_per_iteration:,} env steps per iteration"),
            ("buffer", kind(spec.buffer), own.get("buffer") or settings["buffer"] or type(self.buffer).__name__),
            ("returns", kind(spec.returns), own.get("returns") or settings["returns"]),
            ("critic", kind(spec.critic), own.get("critic") or f"{_encoders(self.critic)} encoder, "
             f"{sum(p.numel() for p in self.critic.parameters()):,} parameters"),
            ("updater", kind(spec.updater), own.get("updater") or f"objective {kind(spec.updater.objective)}"),
            ("policy", _encoders(self.policy), own.get("policy") or f"{n_actors} actor(s), {n_actor:,} parameters, "
             f"device {self.device}"),
            ("evaluator", "-", f"{spec.evaluator.episodes} episodes every {spec.evaluator.every_iterations} iterations"),
            *((f"team {name}", team.role, team.summary) for name, team in self.teams.items()),
        ]


def acting(policy: torch.nn.Module) -> ActingPolicy:
    """A family's policy as what evaluates and renders with it: every family's policy is an ``nn.Module``
    that acts (``harl.families.Built.policy``), which no one type says."""
    return cast(ActingPolicy, policy)


def _encoders(module: torch.nn.Module) -> str:
    """What reads the inputs of ``module``'s networks: cnn (an image encoder is among them), entity
    (attention over entities, ``harl.nets.entity``) or mlp."""
    if any(isinstance(m, EntityEncoder) for m in module.modules()):
        return "entity"
    return "cnn" if any(isinstance(m, (CNNBase, PlainCNN)) for m in module.modules()) else "mlp"


def build_stages(spec: PipelineSpec, source: str = "pipeline", venv: VectorEnv | None = None,
                 eval_venv: VectorEnv | None = None) -> Stages:
    """Build every stage of ``spec``.  Close the result when done.

    ``venv`` / ``eval_venv``: pre-built vector envs (a test's fakes) instead of ``[env]``'s;
    the Stages own and close them.  ``source`` names the pipeline file in errors.
    """
    run, col = spec.run, spec.collector
    opened: list[VectorEnv] = []
    try:
        device = resolve_device(run.device, source)
        notes: list[str] = []
        if run.torch_threads > 0:
            threads, notes = capped_threads(run.torch_threads, source)
            notes += busy_cores_note(threads, usable_cores(), source)  # a run's start-up only: populations skip it
            torch.set_num_threads(threads)
        seed_everything(run.seed)
        w = wiring(spec)
        if venv is None:  # sizes checked against the memory available before anything is allocated
            check_sizes(spec, source, device)  # envs (measured), buffers, /dev/shm: together (harl.envs.footprint)
        with allocating("the environments, buffers and networks", source):
            if venv is None:
                venv = make_vector_env(spec.env, w.n_envs, seed=run.seed * 1000, **env_backend(col))
            opened.append(venv)
            if eval_venv is None:
                eval_venv = make_vector_env(evaluation_env(spec, source), spec.evaluator.n_envs, "inline",
                                            seed=run.seed * 1000 + 500)
            opened.append(eval_venv)
            stages = _compose(spec, source, venv, eval_venv, device, w)
            stages.notes = notes
            return stages
    except BaseException:
        for env in opened:
            env.close()
        raise


def _compose(spec: PipelineSpec, source: str, venv: VectorEnv, eval_venv: VectorEnv, device: torch.device,
             w: FamilyWiring) -> Stages:
    run = spec.run
    family: Family = registry.family_of(spec.collector)
    c = build_teams(spec, source, venv, eval_venv, device, w)  # one team, or several joined slot by slot
    evaluator = Evaluator(spec.evaluator, c.eval_venv, acting(c.acting), device, seed=run.seed * 1000 + 500)
    b = c.built
    return Stages(c.venv, eval_venv, b.policy, b.critic, b.buffer, b.collector, b.returns, b.updater, evaluator,
                  device, save_buffer=family.save_buffer(spec) if c.save_buffer is None else c.save_buffer, spec=spec,
                  family=family, teams=c.teams)
