"""The actor protocol: what the one rollout loop (``harl.collect.rollout``) drives.

The loop owns the envs (reset, restart, a checkpoint's env state, stepping, the episodes that end)
and an actor owns what acts and what is recorded, as Acme splits its environment loop from its
actor (``observe_first`` / ``select_action`` / ``observe``)::

    actor.observe_first(StartRecord(obs, state, avail))  # the envs began episodes (or carry_in: resumed)
    for each rollout:
        actor.roll_over()                          # not before the first: the episodes under way go on
        for t in range(steps):
            step = venv.step(actor.select_action())
            actor.observe(step)
        actor.end_rollout()                        # the rollout's steps are taken (bootstrap values)

A one-team collector's actor acts with its family's policy into its own buffer
(``OnPolicyActor``, ``OffPolicyActor``, ``EpisodeActor``); the teams' collector's actor is a map of
them, one per learning team, beside the players of the teams that do not learn
(``harl.teams.collector.TeamsActor``).  A new way of acting is a new module with a class of these
methods, driven by the same loop.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from harl.buffers.records import StartRecord
from harl.envs.protocol import VectorStep


class Actor(Protocol):
    def observe_first(self, first: StartRecord) -> None:
        """The envs began episodes (a reset or a checkpoint's restart): their first observations."""

    def roll_over(self) -> None:
        """A rollout begins where the last one ended (the episodes under way go on)."""

    def select_action(self) -> list[Any]:
        """The actions for the current observations, per agent, as the envs take them."""

    def observe(self, step: VectorStep) -> None:
        """What the envs answered to the last ``select_action``."""

    def end_rollout(self) -> None:
        """The rollout's steps are taken (V of the last state, for the returns stage)."""

    def abandon(self) -> None:
        """The rollout failed or was interrupted partway: undo what it changed outside the buffer."""

    def carried(self) -> dict[str, Any] | None:
        """What the actor needs to go on exactly from a checkpoint that holds the envs' whole state (its
        next rollout's start), or None: it cannot, so a resumed run restarts the episodes under way."""

    def carry_in(self, carried: dict[str, Any]) -> None:
        """Go on from ``carried()``'s value (the envs restored by the loop)."""

    def compiled(self, eager_s: float) -> Callable[[], list[dict[str, Any]]] | None:
        """A whole rollout as one compiled graph (returning its finished episodes), or None: step
        eagerly; ``eager_s``: the seconds of eager rollouts so far (``compile = "auto"``)."""
