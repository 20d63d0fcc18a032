"""Building a pipeline with ``[teams]``: each team's stages on its side of one world.

A learning team is built by the pipeline's family exactly as a one-team pipeline is, on the team's
view of the world (its agents' spaces); the other teams become players (``harl.teams.players``).
The teams' stages are then joined slot by slot (``harl.teams.stages``) and the teams' collector
steps the world once per step for all of them, so the Trainer's one loop runs a teams pipeline
unchanged (docs/architecture.md, "Teams").
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs
import numpy as np
import torch

from harl import registry
from harl.config.checks import wiring
from harl.config.loading import load_spec_and_notes
from harl.config.spec import PipelineSpec
from harl.config.teams import TeamSpec
from harl.envs.names import agent_groups, agent_names
from harl.envs.protocol import VectorEnv
from harl.errors import CheckpointError, ConfigError
from harl.parts import Parts
from harl.rundir.checkpoint import latest_checkpoint, load_checkpoint
from harl.teams.collector import TeamsCollector
from harl.teams.players import FrozenPlayer, PoolPlayer, ScriptPlayer, SelfPlay, pool_columns
from harl.teams.pool import SnapshotPool
from harl.teams.ratings import Ratings
from harl.teams.stages import TeamsBuffer, TeamsCritic, TeamsPolicy, TeamsReturns, TeamsUpdater
from harl.teams.world import TeamAgents, TeamView, TeamWorld, resolve_teams, team_view


@attrs.frozen
class TeamsBuilt:
    """A teams pipeline's stages, joined slot by slot (the slots of a family's ``Built``), and its world."""

    policy: TeamsPolicy
    critic: TeamsCritic
    returns: TeamsReturns
    buffer: TeamsBuffer
    collector: TeamsCollector
    updater: TeamsUpdater
    world: TeamWorld
    teams: list[TeamAgents]


def resolve(spec: PipelineSpec, venv: VectorEnv, source: str) -> list[TeamAgents]:
    claims = [(t.name, t.config.agents, t.config.reward) for t in spec.teams]
    return resolve_teams(claims, agent_names(venv), agent_groups(venv), source)


def build_teams(spec: PipelineSpec, source: str, venv: VectorEnv, device: torch.device) -> TeamsBuilt:
    """Every team's stages (see the module docstring)."""
    teams = resolve(spec, venv, source)
    by_name = {t.name: t for t in spec.teams}
    learning = [t for t in spec.teams if t.config.role == "learning"]
    built: dict[str, Any] = {}  # team -> its family's Built
    for k, team in enumerate(learning):
        view = team_view(venv, _agents(teams, team.name))
        built[team.name] = _build(team.spec, view, device, spec.run.seed + 7919 * k, spec.run.seed * 1000, source)
    members: dict[str, Any] = {name: b.policy for name, b in built.items()}
    players: dict[str, Any] = {}
    self_play: list[SelfPlay] = []
    for team in spec.teams:
        c, view = team.config, team_view(venv, _agents(teams, team.name))
        if c.role == "frozen":
            players[team.name] = FrozenPlayer(frozen_policy(team, view, device, source), c.deterministic)
        elif c.role == "scripted":
            entry = registry.entry_of(c.script)
            assert entry.factory is not None
            players[team.name] = ScriptPlayer(entry.factory(c.script, view.observation_spaces, view.action_spaces,
                                                            spec.run.seed * 1000 + 17))
        elif c.role == "self_play":
            learner = by_name[c.of]
            _same_sides(team.name, view, team_view(venv, _agents(teams, c.of)), source)
            template = _policy(learner.spec, view, device, spec.run.seed, source)
            pool = SnapshotPool(c.pool_size, c.sample, seed=spec.run.seed * 1000 + 29)
            player = PoolPlayer(template, pool, Ratings(), c.of, c.deterministic, c.snapshot_rating)
            players[team.name] = player
            self_play.append(SelfPlay(team.name, c.of, player, c.snapshot_every))
    policy = TeamsPolicy(teams, members, players, venv.n_agents)
    world = TeamWorld(venv, teams)
    self_play = pool_columns(self_play)
    collector = TeamsCollector(world, teams, {n: b.collector for n, b in built.items()}, players, device,
                               spec.run.seed * 1000, spec.collector.rollout_length, self_play)
    updater = TeamsUpdater({n: b.updater for n, b in built.items()}, {n: b.policy for n, b in built.items()},
                           self_play)
    critic = TeamsCritic({n: b.critic for n, b in built.items()})
    return TeamsBuilt(policy, critic, TeamsReturns({n: b.returns for n, b in built.items()}),
                      TeamsBuffer({n: b.buffer for n, b in built.items()}), collector, updater, world, teams)


def _agents(teams: Sequence[TeamAgents], name: str) -> TeamAgents:
    return next(t for t in teams if t.name == name)


def _build(spec: PipelineSpec, view: TeamView, device: torch.device, seed: int, env_seed: int,
           source: str) -> Any:
    """One team's stages by its family (its ``Built``), on its view of the world."""
    return registry.family_of(spec.collector).build(spec, _parts(spec, view, device, seed, env_seed, source))


def _policy(spec: PipelineSpec, view: TeamView, device: torch.device, seed: int, source: str) -> torch.nn.Module:
    """The acting networks of ``spec``'s family on ``view``, alone where the family builds them alone
    (``Family.policy``), for a team that plays and does not learn."""
    family = registry.family_of(spec.collector)
    parts = _parts(spec, view, device, seed, seed * 1000, source)
    return family.policy(spec, parts) if family.policy is not None else family.build(spec, parts).policy


def _parts(spec: PipelineSpec, view: TeamView, device: torch.device, seed: int, env_seed: int,
           source: str) -> Parts:
    return Parts(obs_spaces=list(view.observation_spaces), act_spaces=list(view.action_spaces),
                 state_dim=int(np.prod(view.state_space.shape)), n_agents=view.n_agents,
                 venv=view,  # type: ignore[arg-type]  # a view: its collector acts and observes, never steps
                 device=device, generator=torch.Generator().manual_seed(seed), env_seed=env_seed,
                 policy_config=spec.policy, wiring=wiring(spec), source=source, state_space=view.state_space)


def _same_sides(name: str, view: TeamView, learner: TeamView, source: str) -> None:
    """Self-play: the snapshots of ``learner`` must fit this team's agents."""
    def shapes(v: TeamView) -> list[tuple[Any, Any]]:
        return [(o.shape, getattr(a, "n", getattr(a, "shape", None))) for o, a in
                zip(v.observation_spaces, v.action_spaces)]
    if shapes(view) != shapes(learner):
        raise ConfigError(
            f"{source}: teams.{name}.of: self-play needs both sides alike, but {name}'s agents "
            f"({', '.join(view.agent_names)}: {shapes(view)}) and {learner.agent_names}'s "
            f"({shapes(learner)}) differ in observation or action spaces; play a frozen or scripted "
            f"team there instead, or choose sides of one shape")


def frozen_policy(team: TeamSpec, view: TeamView, device: torch.device, source: str) -> torch.nn.Module:
    """A trained run's policy for ``team``'s agents: built from that run's pipeline, its newest weights loaded."""
    c, at = team.config, f"{source}: teams.{team.name}.checkpoint"
    path = Path(c.checkpoint).expanduser()
    if not path.exists():
        raise ConfigError(f"{at}: {c.checkpoint!r} does not exist; name a run directory harl train wrote "
                          "(runs/<run-dir>) or a checkpoint file inside one")
    run_dir = path if path.is_dir() else path.parent
    if not (run_dir / "pipeline.toml").is_file():
        raise ConfigError(f"{at}: {c.checkpoint!r} is not a run directory (no pipeline.toml there); name a "
                          "folder harl train wrote (runs/<run-dir>) or a checkpoint file inside one")
    try:
        file = path if path.is_file() else latest_checkpoint(run_dir)
        state = load_checkpoint(file, map_location="cpu")["policy"]
    except CheckpointError as exc:
        raise ConfigError(f"{at}: {exc}") from None
    theirs, _ = load_spec_and_notes(run_dir / "pipeline.toml")
    if theirs.teams:
        wanted = c.source_team or team.name
        found = {t.name: t for t in theirs.teams if t.config.role == "learning"}
        if wanted not in found:
            raise ConfigError(f"{at}: the run {run_dir} has no learning team {wanted!r}; set "
                              f"teams.{team.name}.source_team to one of: {', '.join(found)}")
        spec, prefix = found[wanted].spec, f"members.{wanted}."
        state = {k[len(prefix):]: v for k, v in state.items() if k.startswith(prefix)}
    else:
        spec = theirs
    policy = _policy(spec, view, device, 0, source)
    try:
        policy.load_state_dict(state)
    except (RuntimeError, KeyError) as exc:
        raise ConfigError(f"{at}: the policy of {run_dir} does not fit {team.name}'s agents "
                          f"({', '.join(view.agent_names)}): {str(exc).splitlines()[0]}; a frozen team needs "
                          "a run trained on agents with the same observation and action spaces") from None
    return policy.requires_grad_(False)
