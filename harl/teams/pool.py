"""A bounded pool of policy snapshots that a self-play team draws its opponents from.

A snapshot is a copy of a policy's ``state_dict`` taken every K iterations; the pool keeps the
newest ``size`` of them and, for each, the learner's games and score against it.  Opponents
are drawn by one of three rules:

- ``latest``: the newest snapshot (naive self-play);
- ``uniform``: any kept snapshot, equally likely (fictitious self-play);
- ``pfsp``: prioritized fictitious self-play with AlphaStar's "hard" weighting
  (Vinyals et al. 2019): snapshot ``s`` weighs ``(1 - p_win(s)) ** pfsp_power``, where
  ``p_win(s)`` is the learner's win rate against it, so the learner mostly meets the
  snapshots it still loses to.

The draws come from one numpy ``Generator`` whose state, like everything else of the pool, is
in ``state_dict``: a resumed run draws exactly the opponents an uninterrupted one would.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

import attrs
import numpy as np
import torch

from harl.settings import InvalidSetting

SAMPLE_RULES = ("latest", "uniform", "pfsp")
"""The ways ``SnapshotPool.sample_ids`` picks opponents."""

NO_GAMES_WIN_RATE = 0.5
"""The learner's win rate against a snapshot it has not played yet: an even match, so a new
snapshot is neither favoured nor shunned by ``pfsp`` until games say otherwise."""


@attrs.define
class _Snapshot:
    state: dict[str, Any]
    iteration: int
    games: int = 0
    score: float = 0.0
    """Sum of the learner's outcomes against it: 1 a win, 0.5 a draw, 0 a loss."""


def _copy_state(state: Mapping[str, Any]) -> dict[str, Any]:
    """A copy on the CPU that later updates of the live network cannot reach."""
    return {k: v.detach().to("cpu", copy=True) if isinstance(v, torch.Tensor) else copy.deepcopy(v)
            for k, v in state.items()}


class SnapshotPool:
    """The newest ``size`` snapshots of a policy, the learner's record against each, and a seeded sampler.

    Snapshot ids count up from 0 and are never reused, so an id recorded in an episode stays
    meaningful (or unknown, once evicted) however the pool changes meanwhile.
    """

    def __init__(self, size: int, sample: str, seed: int, pfsp_power: float = 2.0) -> None:
        if isinstance(size, bool) or not isinstance(size, int) or size < 1:
            raise InvalidSetting("pool_size", f"expected an integer >= 1 (snapshots kept), got {size!r}")
        if sample not in SAMPLE_RULES:
            raise InvalidSetting("pool_sample", f"expected one of: {', '.join(SAMPLE_RULES)}; got {sample!r}")
        if not pfsp_power >= 0:  # NaN too
            raise InvalidSetting("pfsp_power", f"expected a value in [0, inf), got {pfsp_power!r}")
        self.size = size
        self.sample = sample
        self.pfsp_power = float(pfsp_power)
        self._rng = np.random.default_rng(seed)
        self._snapshots: dict[int, _Snapshot] = {}
        self._next_id = 0

    # ------------------------------------------------------------------ contents

    def add(self, state: Mapping[str, Any], iteration: int) -> int:
        """Keep a copy of ``state`` taken at ``iteration``; the oldest goes beyond ``size``. Returns its id."""
        snapshot_id = self._next_id
        self._next_id += 1
        self._snapshots[snapshot_id] = _Snapshot(_copy_state(state), int(iteration))
        while len(self._snapshots) > self.size:  # ids ascend in insertion order: the first is the oldest
            del self._snapshots[next(iter(self._snapshots))]
        return snapshot_id

    def ids(self) -> list[int]:
        """The kept snapshots' ids, oldest first."""
        return list(self._snapshots)

    def __len__(self) -> int:
        return len(self._snapshots)

    def __contains__(self, snapshot_id: object) -> bool:
        return snapshot_id in self._snapshots

    def _get(self, snapshot_id: int) -> _Snapshot:
        if snapshot_id not in self._snapshots:
            raise KeyError(f"snapshot {snapshot_id} is not in the pool (kept: {self.ids()})")
        return self._snapshots[snapshot_id]

    def state(self, snapshot_id: int) -> dict[str, Any]:
        """The snapshot's ``state_dict`` (CPU tensors; load it, do not modify it)."""
        return dict(self._get(snapshot_id).state)

    def iteration(self, snapshot_id: int) -> int:
        """The training iteration the snapshot was taken at."""
        return self._get(snapshot_id).iteration

    # ------------------------------------------------------------------ results

    def record(self, snapshot_id: int, outcome: float) -> bool:
        """The learner's result of one game against the snapshot: 1 a win, 0.5 a draw, 0 a loss.

        An episode may end after its opponent was evicted; its result is dropped then (False).
        """
        if not 0.0 <= outcome <= 1.0:
            raise ValueError(f"outcome {outcome!r}: expected 1 (learner won), 0.5 (draw) or 0 (learner lost)")
        snapshot = self._snapshots.get(snapshot_id)
        if snapshot is None:
            return False
        snapshot.games += 1
        snapshot.score += float(outcome)
        return True

    def games(self, snapshot_id: int) -> int:
        """The games the learner has played against the snapshot."""
        return self._get(snapshot_id).games

    def win_rate(self, snapshot_id: int) -> float:
        """The learner's score per game against the snapshot (draws half); 0.5 before any game."""
        snapshot = self._get(snapshot_id)
        return snapshot.score / snapshot.games if snapshot.games else NO_GAMES_WIN_RATE

    # ------------------------------------------------------------------ sampling

    def weights(self) -> np.ndarray:
        """Each kept snapshot's probability of being drawn (``ids()`` order), by the pool's rule."""
        n = len(self._snapshots)
        if self.sample == "latest":
            return np.eye(n)[-1] if n else np.zeros(0)
        if self.sample == "pfsp":
            hard = np.array([(1.0 - self.win_rate(i)) ** self.pfsp_power for i in self._snapshots])
            if hard.sum() > 0:
                return hard / hard.sum()
            # the learner beats every snapshot every time: no snapshot is harder than another
        return np.full(n, 1.0 / n) if n else np.zeros(0)

    def sample_ids(self, n: int) -> list[int]:
        """``n`` opponents' snapshot ids, drawn independently by the pool's rule."""
        if not self._snapshots:
            raise ValueError("the snapshot pool is empty: add a snapshot before drawing opponents")
        if n < 0:
            raise ValueError(f"n = {n}: expected a count >= 0")
        ids = self.ids()
        if self.sample == "latest":  # draws nothing, so a rule change keeps the generator's stream
            return [ids[-1]] * n
        picks = self._rng.choice(len(ids), size=n, p=self.weights())
        return [ids[int(k)] for k in picks]

    # ------------------------------------------------------------------ checkpoint

    def state_dict(self) -> dict[str, Any]:
        """Everything a resumed run needs to continue exactly: snapshots, records, the generator, the next id."""
        return {
            "size": self.size, "sample": self.sample, "pfsp_power": self.pfsp_power,
            "next_id": self._next_id,
            "generator": copy.deepcopy(self._rng.bit_generator.state),
            "snapshots": [{"id": i, "iteration": s.iteration, "games": s.games, "score": s.score,
                           "state": dict(s.state)} for i, s in self._snapshots.items()],
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore ``state_dict()``'s output; the pool's own size must hold the saved snapshots."""
        kept = state["snapshots"]
        if len(kept) > self.size:
            raise InvalidSetting("pool_size", f"the checkpoint's pool holds {len(kept)} snapshots, more than "
                                 f"pool_size = {self.size}; resume with pool_size >= {len(kept)}")
        self._snapshots = {int(s["id"]): _Snapshot(_copy_state(s["state"]), int(s["iteration"]),
                                                   int(s["games"]), float(s["score"])) for s in kept}
        self._next_id = int(state["next_id"])
        self._rng.bit_generator.state = copy.deepcopy(state["generator"])
