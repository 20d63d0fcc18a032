"""Building every team's stages in one world: what the composition root (``harl.compose``) needs.

A pipeline without ``[teams]`` is one team of every agent: its family builds its stages on the
world itself, exactly as always.  With ``[teams]``, each team is built by its role (``harl.roles``,
registered kinds): the teams that learn first, each by the pipeline's family on its side of the
world (its agents' spaces), then every other team's player (a frozen run, a script, a self-play
pool).  The teams' stages are then joined slot by slot (``harl.teams.stages``), and the teams'
collector steps the world once per step for all of them, so the Trainer's one loop runs a teams
pipeline unchanged (docs/architecture.md, "Teams").
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import attrs
import numpy as np
import torch
from torch import nn

from harl import registry
from harl.config.spec import PipelineSpec
from harl.config.teams import TeamSpec, world_steps
from harl.envs.names import agent_groups, agent_names
from harl.envs.protocol import VectorEnv
from harl.errors import ConfigError
from harl.families import Built, Family
from harl.parts import FamilyWiring, Parts
from harl.roles import TeamContext, TeamPlay
from harl.teams.collector import TeamsCollector
from harl.teams.players import pool_columns
from harl.teams.stages import (
    TeamsBuffer,
    TeamsCritic,
    TeamsPolicy,
    TeamsReturns,
    TeamStages,
    TeamsUpdater,
    team_stages,
)
from harl.teams.world import TeamAgents, TeamView, TeamWorld, resolve_teams, team_view


@attrs.frozen
class Composition:
    """What the composition root needs of the build: one stage per slot, the world they step, what the
    evaluator plays in and acts with, and each team's own stages."""

    built: Built
    """The stages: a family's, or the teams' joined slot by slot (``TeamsPolicy``, ``TeamsCollector``, ...)."""
    venv: VectorEnv
    """The training world: the envs themselves, or a ``TeamWorld`` over them (each team's reward and return)."""
    eval_venv: VectorEnv
    """Where the evaluator plays: the evaluation envs, or a ``TeamWorld`` over them."""
    acting: nn.Module
    """What the evaluator acts with: the policy, or (``[evaluator] team``) one team's alone."""
    teams: dict[str, TeamStages] = attrs.field(factory=dict)
    """Each team's own stages, by name (``Stages.teams``); {} for one team."""
    save_buffer: bool | None = None
    """Whether a checkpoint holds the buffer's contents (a learning team's family saves its replay); None:
    as the pipeline's family says."""


def build_teams(spec: PipelineSpec, source: str, venv: VectorEnv, eval_venv: VectorEnv, device: torch.device,
                wiring: FamilyWiring) -> Composition:
    """Every team's stages (see the module docstring); ``wiring``: the pipeline family's ``wiring(spec)``."""
    if not spec.teams:
        return _one_team(spec, source, venv, eval_venv, device, wiring)
    spec = _on_world(spec, venv.n_envs, source)
    teams = resolve(spec, venv, source)
    views = {t.name: team_view(venv, t) for t in teams}
    plays = build_roles(spec, views, device, source)
    learners = {name: play.built for name, play in plays.items() if play.built is not None}
    players = {name: play.player for name, play in plays.items() if play.player is not None}
    pools = pool_columns([play.pool for play in plays.values() if play.pool is not None])
    policy = TeamsPolicy(teams, {n: b.policy for n, b in learners.items()}, players, venv.n_agents)
    world = TeamWorld(venv, teams)
    steps = world_steps(spec.collector)
    for name, built in learners.items():
        if not callable(getattr(built.collector, "actor", None)):
            kind = registry.kind_name(next(t for t in spec.learning_teams if t.name == name).spec.collector)
            raise ConfigError(f"{source}: teams.{name}.collector: collector kind {kind!r} has no actor(buffer) "
                              "method, which a learning team's collector needs so that the one rollout loop can step "
                              "the world for every team (harl.collect.actor.Actor); use a collector of harl's or give "
                              "yours that method")
    collector = TeamsCollector(world, teams, {n: b.collector for n, b in learners.items()}, policy, device,
                               spec.run.seed * 1000, steps, pools)
    updater = TeamsUpdater({n: b.updater for n, b in learners.items()}, {n: b.policy for n, b in learners.items()},
                           pools)
    critic = TeamsCritic({n: b.critic for n, b in learners.items()})
    returns = TeamsReturns({n: b.returns for n, b in learners.items()})
    saved = tuple(t.name for t in spec.learning_teams if registry.family_of(t.spec.collector).save_buffer(t.spec))
    buffer = TeamsBuffer({n: b.buffer for n, b in learners.items()}, saved)
    evaluated_in, acting = _evaluation(spec, source, venv, eval_venv, teams, policy)
    names = agent_names(venv)
    own = team_stages(teams, policy, critic, buffer, returns, updater)
    described = {t.name: attrs.evolve(own[t.name], role=registry.kind_name(t.config.role),
                                      summary=f"{', '.join(names[i] for i in own[t.name].agents)}; "
                                              f"{plays[t.name].summary}; reward {t.config.reward}")
                 for t in spec.teams}
    return Composition(Built(policy, critic, returns, buffer, collector, updater), world, evaluated_in, acting,
                       described, save_buffer=bool(saved))


def _on_world(spec: PipelineSpec, n_envs: int, source: str) -> PipelineSpec:
    """``spec`` with every learning team's collector on the world's ``n_envs`` (its envs are the world's: a
    run opened to play or export has one); a team whose steps per iteration are not the world's
    (``[collector]``'s) is refused, as every team steps the same world."""
    steps = world_steps(spec.collector)
    teams = []
    for team in spec.teams:
        if team.learns:
            own = team.spec.collector
            if world_steps(own) != steps:
                raise ConfigError(f"{source}: teams.{team.name}.collector.rollout_length: {world_steps(own)} vector "
                                  f"steps per iteration, where the world ([collector]) takes {steps}; the teams step "
                                  f"one world, so set it to {steps}")
            if getattr(own, "n_envs", n_envs) != n_envs:
                team = attrs.evolve(team, spec=attrs.evolve(team.spec, collector=attrs.evolve(own, n_envs=n_envs)))
        teams.append(team)
    return attrs.evolve(spec, teams=tuple(teams))


def build_roles(spec: PipelineSpec, views: Mapping[str, TeamView], device: torch.device,
                source: str) -> dict[str, TeamPlay]:
    """Each team built by its role: the learning teams first (in the pipeline's order), then the others,
    which may play what the learners are (self-play's snapshots)."""
    plays: dict[str, TeamPlay] = {}
    learners: dict[str, Built] = {}
    for k, team in enumerate(spec.learning_teams):
        play = _play(team, TeamContext(team, spec, views, learners, device, source, k))
        if play.built is None:
            raise TypeError(f"role {registry.kind_name(team.config.role)!r} learns (registered learns=True) "
                            "but its build made no stages: a learning role returns TeamPlay(built=...)")
        plays[team.name] = play
        learners[team.name] = play.built
    for team in spec.teams:
        if team.name not in plays:
            play = _play(team, TeamContext(team, spec, views, learners, device, source))
            if play.player is None:
                raise TypeError(f"role {registry.kind_name(team.config.role)!r} made no player: a role that "
                                "does not learn returns TeamPlay(player=...), a module with play()")
            plays[team.name] = play
    return plays


def _play(team: TeamSpec, context: TeamContext) -> TeamPlay:
    entry = registry.entry_of(team.config.role)
    if entry.factory is None:
        raise TypeError(f"role {entry.kind!r} has no build")
    play: TeamPlay = entry.factory(team.config.role, context)
    return play


def resolve(spec: PipelineSpec, venv: VectorEnv, source: str) -> list[TeamAgents]:
    """Each team's agents in the world (names, patterns and groups resolved), in the pipeline's order."""
    claims = [(t.name, t.config.agents, t.config.reward) for t in spec.teams]
    return resolve_teams(claims, agent_names(venv), agent_groups(venv), source)


def _one_team(spec: PipelineSpec, source: str, venv: VectorEnv, eval_venv: VectorEnv, device: torch.device,
              wiring: FamilyWiring) -> Composition:
    """A pipeline without ``[teams]``: its family's stages on the world itself."""
    run = spec.run
    family: Family = registry.family_of(spec.collector)
    parts = Parts(list(venv.observation_spaces), list(venv.action_spaces), int(np.prod(venv.state_space.shape)),
                  venv.n_agents, venv, device, torch.Generator().manual_seed(run.seed), run.seed * 1000,
                  spec.policy, wiring, source, venv.state_space)
    built = family.build(spec, parts)
    return Composition(built, venv, eval_venv, built.policy)


def _evaluation(spec: PipelineSpec, source: str, venv: VectorEnv, eval_venv: VectorEnv,
                teams: Sequence[TeamAgents], policy: TeamsPolicy) -> tuple[VectorEnv, nn.Module]:
    """Where the evaluator plays and what it acts with: every team in a ``TeamWorld`` of the evaluation
    envs, or (``[evaluator] team``) that team alone in envs of its agents only (a scripted or built-in
    opponent)."""
    if not spec.evaluator.team:
        return TeamWorld(eval_venv, teams), policy
    team = next(a for a in teams if a.name == spec.evaluator.team)
    theirs, ours = agent_names(eval_venv), [agent_names(venv)[i] for i in team.indices]
    if theirs != ours:
        raise ConfigError(f"{source}: evaluator.team: the evaluation envs' agents ({', '.join(theirs)}) are "
                          f"not team {team.name}'s ({', '.join(ours)}); change [evaluator.env] so that only "
                          "the team's agents play")
    return eval_venv, policy.members[team.name]


def evaluation_env(spec: PipelineSpec, source: str) -> Any:
    """The evaluation envs' ``[env]``: the pipeline's, with ``[evaluator.env]``'s keys for ``[evaluator] team``."""
    ev = spec.evaluator
    if not ev.team:
        return spec.env
    learning = [t.name for t in spec.learning_teams]
    if ev.team not in learning:
        raise ConfigError(f"{source}: evaluator.team: {ev.team!r} is not a learning team of [teams]; write one of: "
                          f"{', '.join(learning) or '(no [teams] in this pipeline)'}")
    unknown = sorted(set(ev.env) - set(attrs.fields_dict(type(spec.env))))
    if unknown:
        raise ConfigError(f"{source}: evaluator.env.{unknown[0]}: not a key of [env] kind = "
                          f'"{registry.kind_name(spec.env)}"; harl stages {registry.kind_name(spec.env)} lists them')
    try:
        return attrs.evolve(spec.env, **ev.env)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"{source}: evaluator.env: {exc}") from None
