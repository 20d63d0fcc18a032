"""Evaluation in competitive games: one team of a run against another run, a script, or its pool.

``harl eval RUN --against RUN2|scripted[:KIND]|pool`` keeps RUN's team ``team`` (its first
learning team unless named) with its checkpoint's weights and gives every other team of the world
to the opponent: RUN2's policy (frozen: RUN2's team of the same name where RUN2 has ``[teams]``,
else its one policy), a script, or RUN's own self-play pool as the checkpoint left it.  The
result is each side's win, loss and draw rate and return, with 95% confidence intervals
(Wilson's for rates, the normal one for returns), so a policy that beats a weak opponent can be
told from one that beats a strong one; ``crossplay`` fills the table of every run against every
other (docs/teams.md).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs
import numpy as np

from harl import registry
from harl.compose import build_stages
from harl.config.spec import PipelineSpec
from harl.config.teams import TEAM_KEYS, TeamSpec
from harl.errors import HarlError
from harl.registry import resolve
from harl.roles.frozen import FrozenRole
from harl.roles.scripted import ScriptedRole
from harl.roles.self_play import SelfPlayRole
from harl.run.open import spec_of_run
from harl.rundir.checkpoint import latest_checkpoint, load_checkpoint

Z95 = 1.959963984540054
"""The normal quantile of a two-sided 95% interval."""


@attrs.frozen
class Estimate:
    """A mean over episodes and its 95% confidence interval."""

    mean: float
    low: float
    high: float

    def show(self, digits: int = 3) -> str:
        return f"{self.mean:.{digits}g} [{self.low:.{digits}g}, {self.high:.{digits}g}]"


def wilson(successes: float, n: int) -> Estimate:
    """Wilson's 95% interval of a rate (sound near 0 and 1, where the normal one is not)."""
    if n == 0:
        return Estimate(math.nan, math.nan, math.nan)
    p = successes / n
    centre = (p + Z95 ** 2 / (2 * n)) / (1 + Z95 ** 2 / n)
    half = Z95 * math.sqrt(p * (1 - p) / n + Z95 ** 2 / (4 * n * n)) / (1 + Z95 ** 2 / n)
    return Estimate(p, max(0.0, round(centre - half, 12)), min(1.0, round(centre + half, 12)))  # no 1e-18 at 0


def normal(values: Sequence[float]) -> Estimate:
    """The mean and its normal 95% interval (the sample standard deviation over sqrt(n))."""
    x = np.asarray(values, dtype=np.float64)
    if x.size == 0:
        return Estimate(math.nan, math.nan, math.nan)
    half = Z95 * float(x.std(ddof=1)) / math.sqrt(x.size) if x.size > 1 else math.nan
    return Estimate(float(x.mean()), float(x.mean()) - half, float(x.mean()) + half)


@attrs.frozen
class Match:
    """``team`` of ``run`` against ``opponent``: its win, loss and draw rates and each side's return."""

    run: Path
    team: str
    opponent: str
    episodes: int
    win: Estimate
    loss: Estimate
    draw: Estimate
    returns: dict[str, Estimate]
    """Each team's return."""
    metrics: dict[str, Estimate] = attrs.field(factory=dict)
    """The env's own episode numbers (``captures`` on MPE simple_tag, ``win`` on SMAX)."""


def learner_of(spec: PipelineSpec, team: str | None, where: str) -> str:
    if not spec.teams:
        raise HarlError(f"{where}: --against plays one team against another, but this run has no [teams] "
                        "(docs/teams.md); evaluate it with harl eval alone")
    learning = [t.name for t in spec.learning_teams]
    name = team or learning[0]
    if name not in learning:
        raise HarlError(f"{where}: --team {name!r} is not a learning team of this run; write one of: "
                        f"{', '.join(learning)}")
    return name


def check_team(run_dir: str | Path, team: str | None, seats: Mapping[str, str] | None = None) -> None:
    """``harl eval RUN --team NAME`` without ``--against``: NAME must be a learning team of RUN (the
    evaluation plays every team as trained; ``--team`` names whose win rate ``--against`` reports),
    and ``--seat`` has no opponent run to take its teams from."""
    if seats:
        raise HarlError("--seat SEAT=TEAM chooses which team of the opponent run plays a seat: give it "
                        "with --against RUN_DIR (harl eval) or to harl crossplay")
    if team is None:
        return
    spec, _ = spec_of_run(Path(run_dir))
    if not spec.teams:
        raise HarlError(f"{run_dir}: --team {team!r}: this run has no [teams]; evaluate it without --team")
    learner_of(spec, team, str(run_dir))


def parse_seats(items: Sequence[str] | None) -> dict[str, str]:
    """``--seat SEAT=TEAM`` options as ``{seat: team}``; a malformed one is refused."""
    seats: dict[str, str] = {}
    for item in items or ():
        seat, sep, team = item.partition("=")
        if not sep or not seat.strip() or not team.strip():
            raise HarlError(f"--seat {item!r}: expected SEAT=TEAM, a team of this run (the seat) and the "
                            "opponent run's learning team that plays it, e.g. --seat blue=red")
        seats[seat.strip()] = team.strip()
    return seats


def seat_sources(spec: PipelineSpec, learner: str, opponent: Path, seats: Mapping[str, str]) -> dict[str, str]:
    """Which learning team of the run ``opponent`` plays each seat (every team of ``spec`` but ``learner``).

    ``seats`` first (``--seat SEAT=TEAM``); else the opponent's learning team of the seat's name;
    else, for a seat that snapshots of a learning team play in self-play (``of``), the opponent's
    learning team of that name (two self-play runs: each one's learner plays the other's pool seat);
    else the opponent's one learning team.  An opponent run without ``[teams]`` plays every seat
    with its one policy (``""``).
    """
    theirs, _ = spec_of_run(opponent)
    learning = [t.name for t in theirs.learning_teams]
    own = {t.name: t for t in spec.teams}
    unknown = sorted(set(seats) - (set(own) - {learner}))
    if unknown:
        raise HarlError(f"--seat {unknown[0]}=...: {unknown[0]!r} is not a seat the opponent plays; the seats "
                        f"are this run's teams but {learner!r}: {', '.join(sorted(set(own) - {learner})) or '(none)'}")
    if not theirs.teams:
        if seats:
            raise HarlError(f"--seat: {opponent} has no [teams]: its one policy plays every seat; "
                            "leave --seat out")
        return {name: "" for name in own if name != learner}
    sources = {}
    for name, team in own.items():
        if name == learner:
            continue
        wanted = seats.get(name)
        if wanted is not None and wanted not in learning:
            raise HarlError(f"--seat {name}={wanted}: {opponent} has no learning team {wanted!r}; write one of: "
                            f"{', '.join(learning)}")
        role = team.config.role
        of = role.of if isinstance(role, SelfPlayRole) else ""
        found = wanted or (name if name in learning else of if of in learning else
                           learning[0] if len(learning) == 1 else None)
        if found is None:
            raise HarlError(f"--against {opponent}: it has no learning team {name!r} to play seat {name!r} and "
                            f"several that could ({', '.join(learning)}); choose one with --seat {name}=TEAM")
        sources[name] = found
    return sources


def opponent_teams(spec: PipelineSpec, learner: str, against: str,
                   seats: Mapping[str, str] | None = None) -> tuple[TeamSpec, ...]:
    """RUN's teams with every team but ``learner`` played by ``against`` (``seats``: see ``seat_sources``)."""
    if seats and (against == "pool" or against.startswith("scripted")):
        raise HarlError(f"--seat: only --against RUN_DIR plays seats with another run's teams, not "
                        f"--against {against}; leave --seat out")
    sources = seat_sources(spec, learner, Path(against), seats or {}) if Path(against).is_dir() else {}
    teams = []
    for team in spec.teams:
        if team.name == learner:
            teams.append(team)
            continue
        c = team.config
        if against == "pool":
            if not isinstance(c.role, SelfPlayRole):
                raise HarlError(f"--against pool: team {team.name!r} plays no pool in this run (role = "
                                f'"{registry.kind_name(c.role)}"); use --against RUN_DIR or --against scripted')
            teams.append(team)
        elif against.startswith("scripted"):
            kind = against.partition(":")[2] or "random"
            entry = resolve("script", kind)
            if entry is None:
                raise HarlError(f"--against {against}: no script kind {kind!r}; harl stages script lists them "
                               f"({', '.join(e.kind for e in registry.kinds('script'))})")
            teams.append(_played_by(team, ScriptedRole(entry.config()), {"script": {"kind": kind}}))
        else:
            if not Path(against).is_dir():
                raise HarlError(f"--against {against}: no such run directory; give a run directory, "
                                '"scripted" (or "scripted:KIND") or "pool"')
            role = FrozenRole(checkpoint=str(against), source_team=sources[team.name])
            teams.append(_played_by(team, role, {"checkpoint": role.checkpoint, "source_team": role.source_team}))
    return tuple(teams)


def _played_by(team: TeamSpec, role: Any, keys: dict[str, Any]) -> TeamSpec:
    """``team`` (its agents and reward) played by ``role`` instead of its own, ``keys`` the role's keys as a
    pipeline writes them: an opponent has no stages and none of its old role's keys."""
    own = {key: team.tables[key] for key in TEAM_KEYS if key in team.tables and key != "role"}
    return TeamSpec(team.name, attrs.evolve(team.config, role=role), None,
                    {**own, "role": registry.kind_name(role), **keys})


def play(run_dir: str | Path, against: str, episodes: int | None = None, team: str | None = None,
         checkpoint: str | Path | None = None, deterministic: bool = True,
         seats: Mapping[str, str] | None = None) -> Match:
    """``team`` of ``run_dir`` (its newest or the named checkpoint) against ``against`` (see the module
    docstring); ``seats``: which learning team of the run ``against`` plays each seat (``seat_sources``).

    The match is played in the run's own world, every team in it: a run that evaluates one team
    alone (``[evaluator] team`` with ``[evaluator.env]``, against the env's built-in opponent) is
    evaluated here in its training env, its other teams played by ``against``.
    """
    run_dir = Path(run_dir)
    spec, _ = spec_of_run(run_dir)
    learner = learner_of(spec, team, str(run_dir))
    spec = attrs.evolve(spec, teams=opponent_teams(spec, learner, against, seats),
                        evaluator=attrs.evolve(spec.evaluator, deterministic=deterministic, team="", env={}))
    path = Path(checkpoint) if checkpoint is not None else latest_checkpoint(run_dir)
    state = load_checkpoint(path)
    with build_stages(spec, str(run_dir / "pipeline.toml")) as stages:
        prefix = f"members.{learner}."
        members: Any = stages.policy.members
        members[learner].load_state_dict({k[len(prefix):]: v for k, v in state["policy"].items()
                                          if k.startswith(prefix)})
        if against == "pool":
            stages.updater.load_state_dict(state["updater"])
        stats = stages.evaluator.evaluate(episodes)
    infos = stats.infos
    n = len(infos)
    wins = sum(float(i.get(f"win_{learner}", 0.0)) for i in infos)
    draws = sum(float(i.get("draw", 0.0)) for i in infos)
    names = [t.name for t in spec.teams]
    ours = {"return", "length", "draw", *(f"{p}_{name}" for name in names for p in ("return", "win"))}
    others = sorted({k for i in infos for k, v in i.items() if k not in ours and isinstance(v, (int, float))})
    return Match(run_dir, learner, against, n, wilson(wins, n), wilson(n - wins - draws, n), wilson(draws, n),
                 {name: normal([float(i[f"return_{name}"]) for i in infos]) for name in names},
                 {k: normal([float(i[k]) for i in infos if k in i]) for k in others})


def crossplay(runs: Sequence[str | Path], episodes: int | None = None, team: str | None = None,
              seats: Mapping[str, str] | None = None) -> list[list[Match]]:
    """Each run's team against each run's (its own included: the diagonal is the run against itself);
    ``seats`` as ``play``'s, the same for every pair."""
    return [[play(a, str(b), episodes, team, seats=seats) for b in runs] for a in runs]
