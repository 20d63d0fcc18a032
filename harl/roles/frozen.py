"""``role = "frozen"``: a trained run's policy plays the team and is never updated.

The run is named by ``checkpoint`` (its directory, for its newest checkpoint, or one checkpoint
file; ``harl train --opponent RUN_DIR`` sets it); its policy is built from that run's own pipeline
on this team's side of the world and loaded with the checkpoint's weights.  A run with ``[teams]``
gives the policy of its learning team ``source_team`` (this team's name unless set).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import attrs
import torch

from harl import registry
from harl.config.loading import load_spec_and_notes
from harl.errors import CheckpointError, ConfigError
from harl.roles import TeamContext, TeamPlay
from harl.rundir.checkpoint import latest_checkpoint, load_checkpoint
from harl.settings import setting
from harl.teams.players import FrozenPlayer


@attrs.frozen
class FrozenRole:
    """``[teams.NAME] role = "frozen"``: a trained run's policy plays the team (checkpoint, or harl train --opponent RUN_DIR)."""

    checkpoint: str = setting(
        "", "the run directory (its newest checkpoint) or checkpoint file whose policy plays this team")
    source_team: str = setting(
        "", "the team of the checkpoint's run that plays this team (a run with [teams]); empty: this team's "
        "name in a run with [teams], or the policy of a one-team run")
    deterministic: bool = setting(
        False, "take the most likely action instead of sampling when collecting")


def build(config: FrozenRole, team: TeamContext) -> TeamPlay:
    policy = trained_policy(config, team)
    return TeamPlay(player=FrozenPlayer(policy, config.deterministic), summary=f"frozen: {config.checkpoint}")


def trained_policy(config: FrozenRole, team: TeamContext) -> torch.nn.Module:
    """The trained run's policy for the team's agents: built from that run's pipeline, its newest
    (or the named) checkpoint's weights loaded."""
    name, view = team.team.name, team.view
    at = f"{team.source}: teams.{name}.checkpoint"
    path = Path(config.checkpoint).expanduser()
    if not path.exists():
        raise ConfigError(f"{at}: {config.checkpoint!r} does not exist; name a run directory harl train wrote "
                          "(runs/<run-dir>) or a checkpoint file inside one")
    run_dir = path if path.is_dir() else path.parent
    if not (run_dir / "pipeline.toml").is_file():
        raise ConfigError(f"{at}: {config.checkpoint!r} is not a run directory (no pipeline.toml there); name a "
                          "folder harl train wrote (runs/<run-dir>) or a checkpoint file inside one")
    try:
        file = path if path.is_file() else latest_checkpoint(run_dir)
        state = load_checkpoint(file, map_location="cpu")["policy"]
    except CheckpointError as exc:
        raise ConfigError(f"{at}: {exc}") from None
    theirs, _ = load_spec_and_notes(run_dir / "pipeline.toml")
    spec = theirs
    if theirs.teams:
        wanted = config.source_team or name
        found = {t.name: t for t in theirs.learning_teams}
        source = found.get(wanted)
        if source is None or source.spec is None:
            raise ConfigError(f"{at}: the run {run_dir} has no learning team {wanted!r}; set "
                              f"teams.{name}.source_team to one of: {', '.join(found)}")
        spec, prefix = source.spec, f"members.{wanted}."
        state = {k[len(prefix):]: v for k, v in state.items() if k.startswith(prefix)}
    policy = team.policy(spec, 0)
    try:
        policy.load_state_dict(state)
    except (RuntimeError, KeyError) as exc:
        raise ConfigError(f"{at}: the policy of {run_dir} does not fit {name}'s agents "
                          f"({', '.join(view.agent_names)}): {str(exc).splitlines()[0]}; a frozen team needs "
                          "a run trained on agents with the same observation and action spaces") from None
    return policy.requires_grad_(False)


def check(config: FrozenRole, built: Mapping[str, Any]) -> Iterable[tuple[list[str], str]]:
    if not config.checkpoint:
        yield (["checkpoint"], "a frozen team plays a trained run: set checkpoint = \"RUN_DIR\" "
               "(or harl train --opponent RUN_DIR)")


registry.register("role", FrozenRole, build, kind="frozen", check=check)
