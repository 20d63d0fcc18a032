"""A self-play pool's snapshots acting as one batched network: each env's rows go to its snapshot.

A pool of ``K`` snapshots in play, acted one snapshot after another, costs ``K`` chains of small
dispatched operations per step: with a full pool of 10 on SMAX 3m self-play, collection ran at
0.38 of one team's rate (``benchmarks/teams_throughput.py --full-pool``).  Here the snapshots'
actors are read stacked along a leading axis (``harl.nets.stacked.StackedActors``, the batching the
agents of one run use), each env's rows are laid out under its snapshot, padded to the busiest
snapshot's count, and one call acts for every snapshot and every agent.

What stacks: a feed-forward ``OnPolicyActors`` whose actors ``StackedActors`` takes (MLP base,
Gaussian or categorical head).  Any other policy (recurrent actors, MAT, the value family) acts
snapshot by snapshot (``PoolPlayer``).  Sampling draws its noise row by row, in the rows' order,
then lays it out as the rows: the draws do not depend on how many snapshots are stacked or how
the envs fall among them, so a resumed run (whose evicted snapshots are gone) samples exactly as
an uninterrupted one.  They reach the rows in another order than snapshot-by-snapshot acting.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from harl.nets.heads import GaussianHead
from harl.nets.stacked import StackedActors, signature
from harl.policy.on_policy import OnPolicyActors


def stacks(template: Any) -> bool:
    """Whether snapshots of ``template``'s shape act as one ``SnapshotStack``."""
    if not isinstance(template, OnPolicyActors) or template.hidden_size:
        return False
    return all(signature(template.actor(i)) is not None for i in range(template.n_agents))


class SnapshotStack:
    """``nets`` (copies of one ``OnPolicyActors``, one per snapshot, ``stacks`` true) as one network.

    ``act(obs, avail, which, deterministic)``: env ``e`` is played by ``nets[which[e]]``.  A shared
    actor runs every agent's rows in one stack; distinct actors, one stack per agent.
    """

    def __init__(self, nets: Sequence[OnPolicyActors]) -> None:
        self.nets = list(nets)
        first = self.nets[0]
        self.shared, self.n_agents = bool(first.shared), first.n_agents
        per = range(1) if self.shared else range(self.n_agents)
        self.stacks = [StackedActors([net.actor(i) for net in self.nets], frozen=True) for i in per]

    def act(self, obs: Sequence[torch.Tensor], avail: Sequence[torch.Tensor | None] | None,
            which: torch.Tensor, deterministic: bool) -> list[torch.Tensor]:
        """Each agent's actions ``(N, k)``, env ``e``'s from snapshot ``which[e]`` (``(N,)``, long)."""
        first = self.nets[0]
        n = obs[0].shape[0]
        masks = [None] * self.n_agents if avail is None else list(avail)
        if self.shared:
            x = torch.cat([first.actor_input(i, obs[i]) for i in range(self.n_agents)])
            mask = None if masks[0] is None else torch.cat(masks)  # type: ignore[arg-type]
            out = self._act(self.stacks[0], x, mask, which.repeat(self.n_agents), deterministic)
            return list(out.split(n))
        return [self._act(self.stacks[i], first.actor_input(i, obs[i]), masks[i], which, deterministic)
                for i in range(self.n_agents)]

    def _act(self, stack: StackedActors, x: torch.Tensor, mask: torch.Tensor | None, which: torch.Tensor,
             deterministic: bool) -> torch.Tensor:
        """One stacked call: row ``r`` of ``x (R, d)`` through snapshot ``which[r]``; actions ``(R, k)``."""
        k = len(self.nets)
        order = torch.argsort(which, stable=True)
        owner = which[order]
        counts = torch.bincount(which, minlength=k)
        rank = torch.arange(which.numel(), device=which.device) - (torch.cumsum(counts, 0) - counts)[owner]
        width = int(counts.max())

        def lay(per_row: torch.Tensor, fill: float) -> torch.Tensor:
            """``per_row (R, c)`` laid out as the rows, ``(K, width, c)``, padding ``fill``."""
            out = per_row.new_full((k, width, per_row.shape[-1]), fill)
            out[owner, rank] = per_row[order]
            return out

        noise = None
        if not deterministic:
            head = stack.template.head
            noise = lay(torch.randn(x.shape[0], head.mean.weight.shape[0], device=x.device)
                        if isinstance(head, GaussianHead)
                        else torch.empty(x.shape[0], sum(head.sizes), device=x.device).exponential_(), 1.0)
        # padding rows may take any action: ones in their masks (none all-masked) and exponential draws
        actions, _ = stack.act(lay(x, 0.0), None if mask is None else lay(mask, 1.0), deterministic, noise)
        out = actions.new_empty((x.shape[0], actions.shape[-1]))
        out[order] = actions[owner, rank]
        return out
