"""TD3 for one agent (HATD3 in the sequential updater, MATD3 in the simultaneous one).

DDPG's learner (``ddpg.py``) with TD3's three changes: twin critics whose minimum forms
the target (``[critic] twin = true``), target-policy smoothing (clipped Gaussian noise on
the target actors' actions, ``policy_noise`` and ``noise_clip`` in units of half the
action range) and delayed updates (actors and all target networks every ``policy_freq``
critic steps).  The actor maximises the first critic network, as in TD3.
"""

from __future__ import annotations

from typing import Any

import attrs
from gymnasium import spaces

from harl.policy.off_policy import OffPolicyActors, policy_builder
from harl.registry import register
from harl.settings import in_range, kind_field, positive, setting
from harl.update.objectives.ddpg import DeterministicLearner, make_actor, smoothed_target_actions
from harl.update.q_critic import QCritic, QCriticConfig

__all__ = ["TD3Config", "make_actor", "make_learner", "smoothed_target_actions"]


@attrs.frozen
class TD3Config:
    """``[updater.objective] kind = "td3"``: DDPG plus target smoothing and delayed updates."""

    kind: str = kind_field("td3")
    lr: float = setting(5e-4, "actor Adam learning rate", positive())
    expl_noise: float = setting(0.1, "exploration noise std, in units of half the action range", in_range(0, None))
    policy_noise: float = setting(0.2, "target smoothing noise std, in units of half the action range", in_range(0, None))
    noise_clip: float = setting(0.5, "target smoothing noise clip, in units of half the action range", in_range(0, None))
    policy_freq: int = setting(2, "critic steps per actor (and target) update", positive())
    polyak: float = setting(0.005, "target-actor update rate (the target critics': [critic] polyak)",
                            in_range(0, 1, low_open=True))
    max_grad_norm: float = setting(0.0, "gradient-norm clip; 0 disables", in_range(0, None))


def make_learner(index: int, policy: OffPolicyActors, critic: QCritic, config: TD3Config,
                 space: spaces.Space) -> DeterministicLearner:
    return DeterministicLearner(index, policy, critic, config, (config.policy_noise, config.noise_clip))


def _needs_twin(config: TD3Config, built: Any) -> Any:
    critic = built.get("critic")
    if isinstance(critic, QCriticConfig) and not critic.twin:
        yield (["critic", "twin"], "td3 takes the minimum of twin critics in its targets; set critic.twin = true "
               '(or updater.objective.kind = "ddpg")')



register("updater.objective", TD3Config, family="off_policy", requires={"critic": "q_values"},
         check=_needs_twin,
         factory=lambda config, parts, agent: make_learner(agent, parts.policy, parts.critic, config,
                                                           parts.act_spaces[agent]),
         policy=policy_builder(make_actor, with_targets=True))
