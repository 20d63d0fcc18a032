"""The one rollout loop: every collector's envs stepped here, for any actor (``harl.collect.actor``).

It owns what the envs do and what a checkpoint needs of them: the first reset (or a checkpoint's
restart of the episodes under way, or its whole env state where the env takes one), the steps of a
rollout, the episodes that end, and the state safe to save at any moment (``ExitState``).  What acts
and what is stored is the actor's, so a one-team collector and the teams' composite actor go through
the same lines::

    loop = RolloutLoop(venv, seed, steps, state=collector_state)
    stats = loop.collect(actor)                  # steps vector steps; the episodes that ended
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from harl.buffers.records import StartRecord
from harl.collect.actor import Actor
from harl.collect.exit_state import ExitState
from harl.collect.stats import CollectStats
from harl.envs.protocol import VectorEnv, can_set_env_state, get_env_state


class RolloutLoop:
    """Steps ``venv`` ``steps`` times per ``collect`` for an actor; see the module docstring.

    ``own_state``: the collector's own checkpoint keys (step counts, generators) merged into the
    loop's (``started``, ``episode_starts``, and where the env gives its whole state and the actor its
    next start, ``env_state`` and ``next``)."""

    def __init__(self, venv: VectorEnv, seed: int, steps: int,
                 own_state: Callable[[], dict[str, Any]] = dict) -> None:
        self.venv = venv
        self.seed = seed
        self.steps = steps
        self.own_state = own_state
        self.started = False
        self.actor: Actor | None = None
        """The actor of the last ``collect`` (whose ``carried`` a checkpoint takes)."""
        self.restart: list[dict[str, Any]] | None = None
        """A checkpoint's episode starts, to begin again at the first ``collect``."""
        self.resume: dict[str, Any] | None = None
        """A checkpoint's whole env state and the actor's next start (``env_state``, ``next``)."""
        self.eager_s = 0.0
        """Seconds of eager rollouts so far (what ``compile = "auto"`` weighs)."""
        self.exit = ExitState(self._state)

    # ------------------------------------------------------------------ starting

    def take_restart(self) -> list[dict[str, Any]] | None:
        """The checkpoint's episode starts the next start would restart (and forget them)."""
        restart, self.restart = self.restart, None
        return restart

    def take_resume(self) -> dict[str, Any] | None:
        """The checkpoint's whole env state and the actor's next start, or None (and forget them)."""
        resume, self.resume = self.resume, None
        return resume

    def start(self, actor: Actor, first: StartRecord | None = None) -> None:
        """Begin the envs' episodes for ``actor``: ``first`` (the caller reset them), else a checkpoint's
        env state, else its restart, else a reset."""
        self.actor = actor
        if first is None:
            resume = self.take_resume()
            if resume is not None and can_set_env_state(self.venv) and actor.carried() is not None:
                self.venv.set_state(resume["env_state"])  # type: ignore[attr-defined]
                self.resumed(actor, resume["next"])
                return
            restart = self.take_restart()
            if restart is not None:
                obs, state, avail = self.venv.restart(restart)
            else:
                obs, state, avail = self.venv.reset(seed=self.seed)
            first = StartRecord(obs, state, avail)
        actor.observe_first(first)
        self.started = True

    def resumed(self, actor: Actor, carried: dict[str, Any]) -> None:
        """The envs were set to a checkpoint's state (by the loop or its caller): ``actor`` goes on."""
        self.actor = actor
        actor.carry_in(carried)
        self.restart = None
        self.started = True

    # ------------------------------------------------------------------ stepping

    def collect(self, actor: Actor) -> CollectStats:
        """``steps`` vector steps of ``actor`` (its first rollout begins the envs' episodes)."""
        self.exit.collecting()
        try:
            if not self.started:
                self.start(actor)
            else:
                self.actor = actor
                actor.roll_over()
            episodes = self.run(actor)
            actor.end_rollout()
        except BaseException:
            actor.abandon()
            raise
        self.exit.collected()
        return CollectStats(self.steps * self.venv.n_envs, episodes)

    def run(self, actor: Actor) -> list[dict[str, Any]]:
        """One rollout's steps: compiled where the actor has a compiled rollout, else eagerly."""
        fused = actor.compiled(self.eager_s)
        if fused is not None:
            return fused()
        began = time.perf_counter()
        episodes: list[dict[str, Any]] = []
        for _ in range(self.steps):
            step = self.venv.step(actor.select_action())
            actor.observe(step)
            episodes.extend(step.episode_infos)
        self.eager_s += time.perf_counter() - began
        return episodes

    # ------------------------------------------------------------------ checkpoints

    def _state(self) -> dict[str, Any]:
        state: dict[str, Any] = {"started": self.started,
                                 "episode_starts": self.venv.episode_starts() if self.started else None}
        carried = None if not self.started or self.actor is None else self.actor.carried()
        env_state = None if carried is None else get_env_state(self.venv)
        if carried is not None and env_state is not None:
            state.update(env_state=env_state, next=carried)
        return {**state, **self.own_state()}

    def state_dict(self) -> dict[str, Any]:
        """How the envs' current episodes began (and their whole state, where the env and the actor
        give it), with the collector's own keys; inside a ``collect`` cut short, or after the envs
        failed, as of the end of the last whole one (``ExitState``)."""
        return self.exit.current()

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """The next start continues the saved episodes (``env_state``) or begins them again."""
        started = bool(state.get("started", state.get("episode_starts") is not None))
        self.restart = state["episode_starts"] if started else None
        self.resume = dict(state) if started and "env_state" in state else None
        self.started = False
        self.exit.saved = dict(state)
