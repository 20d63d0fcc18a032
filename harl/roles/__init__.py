"""Roles: how a team of a ``[teams]`` pipeline plays, each a registered kind (``[teams.NAME] role``).

A role is one module: an attrs class whose fields are its keys in the team's table (beside
``agents``, ``reward`` and ``role`` itself), and at its bottom, as a script or an objective does::

    register("role", FrozenRole, build, kind="frozen", check=check)
    register("role", LearningRole, build, kind="learning", default=True, learns=True)

- ``build(config, team: TeamContext) -> TeamPlay``: a role that learns (``learns=True``: the loader
  gives its team a pipeline of its own, ``TeamSpec.spec``) builds its team's stages by the team's
  family (``TeamPlay.built``); any other makes a ``harl.teams.players.Player`` (``TeamPlay.player``),
  and a self-play role also the pool the updater feeds and the collector scores (``TeamPlay.pool``).
  The teams that learn are built first, in the pipeline's order, so the others find them in
  ``team.learners``.
- ``check(config, {"teams": every TeamSpec, "team": its own})``: what its settings ask that cannot
  be, as ``(key path inside the team's table, message)``, when the pipeline is loaded.

harl's roles are the modules of this package (``registry.BUILTIN``); a user's is
``role = "my_pkg.module:MyRole"``, registered the same way in its module.  ``harl.team_build``
builds every team through its role and joins their stages (docs/architecture.md, "Teams").
"""

from __future__ import annotations

from collections.abc import Mapping

import attrs
import numpy as np
import torch
from torch import nn

from harl import registry
from harl.config.checks import wiring
from harl.config.spec import PipelineSpec
from harl.config.teams import TeamSpec
from harl.families import Built, Family
from harl.parts import Parts
from harl.teams.players import SelfPlay
from harl.teams.world import TeamView


@attrs.frozen
class TeamPlay:
    """What a role built for its team: its stages (it learns) or its player (it does not)."""

    built: Built | None = None
    """A learning team's stages, by its family, on its view of the world."""
    player: nn.Module | None = None
    """How a team that does not learn acts: an ``nn.Module`` with ``play`` (``harl.teams.players.Player``)."""
    pool: SelfPlay | None = None
    """A self-play pool: the teams' updater adds its snapshots, the teams' collector scores its games."""
    summary: str = ""
    """``harl check``'s words for what plays the team (``HAPPO (sequential, ppo)``, ``frozen: runs/x``)."""


@attrs.frozen
class TeamContext:
    """What a role's ``build`` gets besides its config: its team, the world as each team sees it, and
    the learning teams built so far."""

    team: TeamSpec
    pipeline: PipelineSpec
    views: Mapping[str, TeamView]
    """Every team's side of the world (spaces, agent names), by team."""
    learners: Mapping[str, Built]
    """The learning teams' stages, by team (all of them, for a team that does not learn)."""
    device: torch.device
    source: str
    index: int = -1
    """Its place among the learning teams (its stages' seeds); -1 for a team that does not learn."""

    @property
    def view(self) -> TeamView:
        """This team's side of the world."""
        return self.views[self.team.name]

    @property
    def seed(self) -> int:
        """The pipeline's ``[run] seed``."""
        return self.pipeline.run.seed

    def learning_team(self, name: str) -> TeamSpec | None:
        """The learning team called ``name`` (its spec: its pipeline and tables), if there is one."""
        return next((t for t in self.pipeline.learning_teams if t.name == name), None)

    def parts(self, spec: PipelineSpec, seed: int, env_seed: int) -> Parts:
        """The ``Parts`` a family builds ``spec``'s stages from, on this team's view (never stepped: its
        collector acts and observes, the teams' collector steps the world)."""
        view = self.view
        return Parts(obs_spaces=list(view.observation_spaces), act_spaces=list(view.action_spaces),
                     state_dim=int(np.prod(view.state_space.shape)), n_agents=view.n_agents,
                     venv=view,  # type: ignore[arg-type]  # a view: its collector acts and observes, never steps
                     device=self.device, generator=torch.Generator().manual_seed(seed), env_seed=env_seed,
                     policy_config=spec.policy, wiring=wiring(spec), source=self.source,
                     state_space=view.state_space)

    def policy(self, spec: PipelineSpec, seed: int) -> nn.Module:
        """The acting networks of ``spec``'s family on this team's view: alone where the family builds
        them alone (``Family.policy``), else its whole build's ``policy``; for a team that plays and
        does not learn."""
        family: Family = registry.family_of(spec.collector)
        parts = self.parts(spec, seed, seed * 1000)
        return family.policy(spec, parts) if family.policy is not None else family.build(spec, parts).policy
