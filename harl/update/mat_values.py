"""MAT's critic: the value head on the transformer's encoder, one value per agent.

``[critic] kind = "mat_v"`` builds no network of its own: its values are those of the policy's
encoder (``harl.policy.mat``), read from the agents' observations (``reads``: the collector and the
rollout buffer hand it the stacked observations instead of the state).  During collection the
policy's own step gives them (``TransformerPolicy.sample`` encodes once, for the actions and the
values, as MAT's ``get_actions``): the collector stores ``denormalize`` of them; ``value`` encodes
again only where no step of the policy did (the state an episode ended in, the rollout's last).  It holds the value
normaliser and the value loss, which the ``joint`` updater adds to the objective's loss (one
optimiser over the whole transformer), as MAT's trainer::

    v_clipped = v_old + clip(v - v_old, -value_clip, value_clip)          # normalised units
    err       = normalize(R) - v,   err_clipped = normalize(R) - v_clipped  # after updating the normaliser with R
    value_loss = sum_{n,i} m_{n,i} max(huber(err), huber(err_clipped)) / sum_{n,i} m_{n,i}

with ``m`` the agents' active masks (``active_masks``, MAT's ``use_value_active_masks``; off: a plain
mean over every (step, agent), dead agents' rows included).  MAT's ``--use_value_active_masks`` is a
``store_false`` flag: the scripts that pass it (``train_smac.sh``, ``train_mujoco.sh`` and others)
turn the masks off, and the shipped SMAX and MaMuJoCo pipelines set ``active_masks = false``.  The
objective's own ``active_masks`` (MAT's ``use_policy_active_masks``) masks the policy loss.  One
difference from MAT's code by default: harl's Huber loss is symmetric; MAT's ``huber_loss``
gives 0 where the error is below ``-huber_delta`` (its linear branch tests ``e > d``), which
with ``huber_delta = 10`` on normalised values almost never happens; ``huber_one_sided = true``
computes MAT's.
MAT clips the value change by its PPO ``clip_param``: the shipped pipelines set
``value_clip`` to the objective's ``clip``.

The rollout buffer stores one value per agent (``per_agent_values``), so GAE runs per agent on the
agent's own reward, as MAT's buffer does.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import attrs
import torch
from torch import nn

from harl.policy.mat_policy import TransformerPolicy
from harl.registry import register
from harl.returns.value_norm import ValueNorm
from harl.settings import in_range, kind_field, positive, setting
from harl.update.common import HUBER_ONE_SIDED_HELP
from harl.update.v_critic import value_loss


@attrs.frozen
class MATValuesConfig:
    """``[critic] kind = "mat_v"``: the MAT encoder's value head (one value per agent), its loss added to the objective's."""

    kind: str = kind_field("mat_v")
    value_loss_coef: float = setting(1.0, "weight of the value loss in the transformer's one loss", positive())
    clip_value_loss: bool = setting(True, "PPO-style clipping of the value change")
    value_clip: float = setting(0.2, "clip range of the value change, normalised units (MAT: its PPO clip_param)",
                                positive())
    huber_delta: float = setting(10.0, "Huber loss threshold; 0 means squared error", in_range(0, None))
    huber_one_sided: bool = setting(False, HUBER_ONE_SIDED_HELP)
    value_norm: bool = setting(True, "normalise targets with a running mean/std (HARL's ValueNorm)")
    active_masks: bool = setting(True, "average the value loss over active agents only (MAT's "
                                 "use_value_active_masks, its default; MAT's SMAC script turns it off); false: "
                                 "over all")


class TransformerValues(nn.Module):
    """V of every agent from the policy's encoder; in env units (``value``), as every V critic."""

    per_agent_values = True
    """One value per agent: the rollout buffer stores ``(T, E, A)`` values and per-agent rewards."""
    hidden_size = 0

    def __init__(self, policy: TransformerPolicy, config: MATValuesConfig) -> None:
        super().__init__()
        self._policy = (policy,)  # not a submodule: its weights are the policy's, saved once
        self.normalizer = ValueNorm() if config.value_norm else None

    @property
    def policy(self) -> TransformerPolicy:
        return self._policy[0]

    def reads(self, obs: Sequence[Any], state: Any) -> torch.Tensor:
        """What the critic reads of a step: the agents' observations ``(..., A, d)``, not the state."""
        return self.policy.stack_obs(obs)

    def normalized(self, x: torch.Tensor, hidden: Any = None, starts: Any = None) -> torch.Tensor:
        """Raw encoder values ``(..., A)`` (normalised units when value normalisation is on)."""
        lead = x.shape[:-2]
        values, _ = self.policy.encode(x.reshape(-1, *x.shape[-2:]))  # no positional embedding: any order
        return values.reshape(*lead, x.shape[-2])

    def denormalize(self, v: torch.Tensor) -> torch.Tensor:
        """Values in the normaliser's units (the encoder's, ``TeamSample.values``) -> env units."""
        return v if self.normalizer is None else self.normalizer.denormalize(v)

    def normalize_targets(self, x: torch.Tensor) -> torch.Tensor:
        return x if self.normalizer is None else self.normalizer.normalize(x)

    @torch.no_grad()
    def value(self, x: torch.Tensor, hidden: Any = None, starts: Any = None) -> torch.Tensor:
        """Values in env units."""
        return self.denormalize(self.normalized(x))

    @torch.no_grad()
    def step(self, x: torch.Tensor, hidden: Any, starts: Any) -> tuple[torch.Tensor, None]:
        return self.value(x), None


def mat_value_loss(new: torch.Tensor, old: torch.Tensor, target: torch.Tensor, active: torch.Tensor,
                   clip: float | None, huber_delta: float, active_masks: bool = True,
                   one_sided: bool = False) -> torch.Tensor:
    """The value loss above, all in normalised units, ``(N, A)`` each: the V critic's per-sample
    ``value_loss``, averaged over the active agents."""
    loss = value_loss(new, old, target, clip, huber_delta, one_sided)
    if not active_masks:
        return loss.mean()
    return (loss * active).sum() / active.sum().clamp(min=1.0)


class TransformerValueLoss:
    """The critic's share of the joint update: the value loss of a minibatch (it updates the
    value normaliser with the minibatch's returns first, as MAT's trainer does)."""

    def __init__(self, critic: TransformerValues, config: MATValuesConfig) -> None:
        self.critic = critic
        self.config = config
        self.value_loss_coef = config.value_loss_coef

    def old_values(self, values: torch.Tensor) -> torch.Tensor:
        """Collection-time values (env units) in the normaliser's units as it stands before the update."""
        return self.critic.normalize_targets(values)

    def __call__(self, new: torch.Tensor, batch: Any) -> torch.Tensor:
        cfg = self.config
        if self.critic.normalizer is not None:
            self.critic.normalizer.update(batch.returns)
        target = self.critic.normalize_targets(batch.returns)
        return mat_value_loss(new, batch.old_values, target, batch.active,
                              cfg.value_clip if cfg.clip_value_loss else None, cfg.huber_delta, cfg.active_masks,
                              cfg.huber_one_sided)


def _values(config: MATValuesConfig, parts: Any) -> TransformerValues:
    if not isinstance(parts.policy, TransformerPolicy):
        raise TypeError('critic.kind = "mat_v" reads the values of the transformer that updater.objective.kind = '
                        '"mat" or "mat_dec" builds')
    return TransformerValues(parts.policy, config)


register("critic", MATValuesConfig, _values, family="on_policy", provides=("transformer_values",),
         requires={"updater.objective": "transformer_policy"},
         learner=lambda critic, config, parts: TransformerValueLoss(critic, config))
