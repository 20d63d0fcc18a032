"""Sable's critic: the value head on its encoder, one value per agent, and Mava's value loss.

``[critic] kind = "sable_v"`` builds no network of its own, as ``mat_v``: the values are the policy's
encoder's (``harl.policy.sable_policy``).  A collection step's values come with its actions (the
policy's ``sample``); this critic computes only V of the states no step acts in (the rollout's
last, an ended episode's final), from the retention states the latest step left.  Mava normalises
no values, so they are in env units throughout.  Its loss, which the ``joint`` updater adds to the
objective's, is Mava's (mava/systems/sable/anakin/rec_sable.py:237-244, ff_sable.py:221-228)::

    v_clipped  = v_old + clip(v - v_old, -value_clip, value_clip)
    value_loss = 0.5 * mean_{n,i} max((v - R)^2, (v_clipped - R)^2)

a plain mean over every (step, agent) of the minibatch; ``value_clip`` is Mava's ``clip_eps``
(the PPO clip, 0.2) and ``value_loss_coef`` its ``vf_coef`` (0.5).

``value_norm`` (off: Mava's) is not Mava's: it standardises the targets with a running mean and
variance (HARL's ``ValueNorm``, as ``mat_v``): the encoder's values are then in its units, the loss
above computed on ``normalize(R)`` (after updating the statistics with the minibatch's targets) and
the normalised collection-time values, and collection stores ``denormalize(v)``.  Mava's tasks
have returns of order 1; on MPE's (about -80) the unnormalised value loss's gradient is some 100
times the policy's, and the 0.5 gradient-norm clip leaves the policy nearly still (docs/sable.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import attrs
import torch
from torch import nn

from harl.policy.sable_policy import SablePolicy
from harl.registry import register
from harl.returns.value_norm import ValueNorm
from harl.settings import kind_field, positive, setting


@attrs.frozen
class SableValuesConfig:
    """``[critic] kind = "sable_v"``: Sable's encoder's value head (one value per agent), its loss added to the
    objective's."""

    kind: str = kind_field("sable_v")
    value_loss_coef: float = setting(0.5, "weight of the value loss in Sable's one loss (Mava's vf_coef)", positive())
    clip_value_loss: bool = setting(True, "PPO-style clipping of the value change (Mava clips it)")
    value_clip: float = setting(0.2, "clip range of the value change (Mava: its clip_eps, the PPO clip)", positive())
    value_norm: bool = setting(False, "standardise the value targets with a running mean/std (HARL's ValueNorm, "
                               "as mat_v); Mava has none (false)")


class SableValues(nn.Module):
    """V of every agent from the policy's encoder, in env units, as every V critic."""

    per_agent_values = True
    """One value per agent: the rollout buffer stores ``(T, E, A)`` values and per-agent rewards."""
    hidden_size = 0

    def __init__(self, policy: SablePolicy, value_norm: bool = False) -> None:
        super().__init__()
        self._policy = (policy,)  # not a submodule: its weights are the policy's, saved once
        self.normalizer = ValueNorm() if value_norm else None

    @property
    def policy(self) -> SablePolicy:
        return self._policy[0]

    def reads(self, obs: Sequence[Any], state: Any) -> torch.Tensor:
        """What the critic reads of a step: the agents' stacked observations ``(..., A, d)``."""
        return self.policy.stack_obs(obs)

    def denormalize(self, v: torch.Tensor) -> torch.Tensor:
        """The encoder's values (the policy step's) -> env units (as they are without ``value_norm``)."""
        return v if self.normalizer is None else self.normalizer.denormalize(v)

    def normalize_targets(self, x: torch.Tensor) -> torch.Tensor:
        return x if self.normalizer is None else self.normalizer.normalize(x)

    @torch.no_grad()
    def value(self, x: torch.Tensor, hidden: Any = None, starts: Any = None) -> torch.Tensor:
        """``(E, A)`` values of stacked observations in env units, from the states the policy's latest step left."""
        return self.denormalize(self.policy.bootstrap_values(x))


def sable_value_loss(new: torch.Tensor, old: torch.Tensor, target: torch.Tensor, clip: float | None) -> torch.Tensor:
    """Mava's value loss above over tensors of one shape (no clip where ``clip`` is None)."""
    loss = (new - target).square()
    if clip is not None:
        clipped = old + (new - old).clamp(-clip, clip)
        loss = torch.maximum(loss, (clipped - target).square())
    return 0.5 * loss.mean()


class SableValueLoss:
    """The critic's share of the joint update: the value loss of a minibatch."""

    def __init__(self, critic: SableValues, config: SableValuesConfig) -> None:
        self.critic, self.config = critic, config
        self.value_loss_coef = config.value_loss_coef

    def old_values(self, values: torch.Tensor) -> torch.Tensor:
        """Collection-time values (env units) in the encoder's units as the statistics stand before the update."""
        return self.critic.normalize_targets(values)

    def __call__(self, new: torch.Tensor, batch: Any) -> torch.Tensor:
        target, norm = batch.returns, self.critic.normalizer
        if norm is not None:  # the statistics first take in this minibatch's targets (as mat_v)
            norm.update(target)
            target = norm.normalize(target)
        clip = self.config.value_clip if self.config.clip_value_loss else None
        return sable_value_loss(new, batch.old_values, target, clip)


def _values(config: SableValuesConfig, parts: Any) -> SableValues:
    if not isinstance(parts.policy, SablePolicy):
        raise TypeError('critic.kind = "sable_v" reads the values of the network that updater.objective.kind = '
                        '"sable" builds')
    return SableValues(parts.policy, config.value_norm)


register("critic", SableValuesConfig, _values, family="on_policy", provides=("sable_values",),
         requires={"updater.objective": "sable_policy"},
         learner=lambda critic, config, parts: SableValueLoss(critic, config))
