"""MAT's objective: PPO over the whole team at once, the Multi-Agent Transformer its policy.

``[updater.objective] kind = "mat"`` (or ``"mat_dec"``, the decentralised decoder) builds the
transformer as the pipeline's policy (``harl.policy.mat``) and trains it with one Adam over all
its weights.  Per minibatch of env steps (every agent of a step together), as MAT's trainer::

    r_{n,i,j}  = exp(log pi(a_{n,i,j}) - log pi_old(a_{n,i,j}))        # per agent i, per action dimension j
    policy_loss = - sum_{n,i} m_{n,i} sum_j min(r A_{n,i}, clip(r, 1-c, 1+c) A_{n,i}) / sum_{n,i} m_{n,i}
    entropy     =   sum_{n,i} m_{n,i} sum_j H_{n,i,j} / sum_{n,i} m_{n,i}
    loss = policy_loss - entropy_coef * entropy + value_loss_coef * value_loss

``m`` the agents' active masks (``active_masks``, MAT's ``use_policy_active_masks``; false: ``m`` is
1 everywhere, the policy loss a plain mean over the (step, agent) pairs and the entropy, as MAT's
``entropy.mean()``, a plain mean over the (step, agent, dimension) triples), ``A`` the advantages
(per agent, GAE on the agent's own value, standardised over every agent's active samples: the
rollout buffer's joint FP normalisation);
``value_loss`` is ``[critic] kind = "mat_v"``'s (``harl.update.mat_values``): the encoder's value
head is the critic.  The ``joint`` updater (``harl.update.joint``) runs the epochs x minibatches.

Defaults are MAT's ``mat/config.py``: 1 block, 64-wide tokens, 1 head, lr 5e-4, Adam eps 1e-5,
15 epochs, 1 minibatch, clip 0.2, entropy 0.01, gradient-norm clip 10, policy active masks on;
MAT's train scripts' for ``mat_dec``: one MLP decoder shared by every agent (``share_actor``); and
what MAT's envs give its transformer: each agent's one-hot id after its observation (``agent_id``;
the encoder has no positional embedding, so the id is how it tells agents with alike observations
apart).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

import attrs
import torch

from harl.policy import mat_decode
from harl.policy.mat import MultiAgentTransformer
from harl.policy.mat_orders import ORDERS, draw_order
from harl.policy.mat_policy import transformer_policy
from harl.registry import register
from harl.settings import in_range, kind_field, one_of, own_first, positive, setting
from harl.update.common import optimizer_step


@attrs.frozen
class TransformerPPOConfig:
    """The keys MAT and MAT-Dec share: the transformer's size and PPO's settings."""

    n_block: int = setting(1, "encoder (and decoder) blocks", positive())
    n_embd: int = setting(64, "width of every agent's token", positive())
    n_head: int = setting(1, "attention heads (a divisor of n_embd)", positive())
    clip: float = setting(0.2, "clip range of each agent's probability ratio", in_range(0, 1, low_open=True))
    epochs: int = setting(15, "passes over the rollout per iteration", positive())
    minibatches: int = setting(1, "minibatches (of env steps, all agents of a step together) per pass",
                               positive())
    entropy_coef: float = setting(0.01, "weight of the entropy bonus", in_range(0, None))
    lr: float = setting(5e-4, "Adam learning rate of the whole transformer (encoder, value head, decoder)",
                        positive())
    adam_eps: float = setting(1e-5, "Adam epsilon", positive())
    weight_decay: float = setting(0.0, "Adam weight decay", in_range(0, None))
    max_grad_norm: float = setting(10.0, "gradient-norm clip over the whole transformer; 0 disables",
                                   in_range(0, None))
    active_masks: bool = setting(True, "average the policy loss and the entropy over the active (alive) agents "
                                 "only (MAT's use_policy_active_masks); false: over every agent, dead or alive")
    agent_id: bool = setting(True, "append each agent's one-hot id to its observation, as MAT's own envs do "
                             "(MPE, SMAC and MuJoCo: agent_id_feats); false: the env's observation alone")


@attrs.frozen(field_transformer=own_first)
class MATConfig(TransformerPPOConfig):
    """``[updater.objective] kind = "mat"``: the Multi-Agent Transformer, actions decoded one agent after another."""

    kind: str = kind_field("mat")
    order: str = setting("fixed", "the agents' decoding order: fixed (agent 0 first, as MAT), random (a "
                         "permutation drawn for each rollout, kept for its update) or episode (a permutation drawn "
                         "for each episode of each env, as HAPPO draws its agents' order; evaluation and export "
                         "decode agent 0 first)", one_of(ORDERS))


@attrs.frozen(field_transformer=own_first)
class MATDecConfig(TransformerPPOConfig):
    """``[updater.objective] kind = "mat_dec"``: MAT-Dec, MAT's encoder with a decentralised decoder (an MLP on
    each agent's own observation, one shared by every agent as MAT's train scripts set it)."""

    kind: str = kind_field("mat_dec")
    share_actor: bool = setting(True, "one MLP decoder shared by every agent, as MAT's train scripts set for "
                                "mat_dec (dec_actor and share_actor); false: one MLP per agent")

    @property
    def decentralised(self) -> bool:
        return True


@attrs.frozen
class TeamBatch:
    """A rollout as MAT's update reads it: ``N = T * E`` env steps, every agent of a step in one row."""

    obs: torch.Tensor
    """``(N, A, d)`` observations, zero-padded to the widest."""
    actions: torch.Tensor
    """``(N, A, k)``."""
    old_log_probs: torch.Tensor
    """``(N, A, k)`` per-dimension log-probabilities at collection."""
    avail: torch.Tensor | None
    """``(N, A, n)`` available-action masks (None: a Box, or an env without masks)."""
    active: torch.Tensor
    """``(N, A)`` 1 where the agent was alive."""
    advantages: torch.Tensor
    """``(N, A)`` standardised advantages."""
    old_values: torch.Tensor
    """``(N, A)`` values at collection, in the value normaliser's units."""
    returns: torch.Tensor
    """``(N, A)`` value targets, env units."""
    orders: torch.Tensor | None = None
    """``(N, A)`` each step's decoding order as collection recorded it (``order = "random"`` / ``"episode"``);
    None: agent 0 first (the network's ``order``)."""

    @property
    def size(self) -> int:
        return int(self.obs.shape[0])

    def select(self, rows: torch.Tensor) -> TeamBatch:
        return TeamBatch(self.obs[rows], self.actions[rows], self.old_log_probs[rows],
                         None if self.avail is None else self.avail[rows], self.active[rows],
                         self.advantages[rows], self.old_values[rows], self.returns[rows],
                         None if self.orders is None else self.orders[rows])


def mat_policy_loss(log_probs: torch.Tensor, old_log_probs: torch.Tensor, advantages: torch.Tensor,
                    active: torch.Tensor, clip: float, active_masks: bool = True) -> tuple[torch.Tensor, torch.Tensor]:
    """(policy loss, ratios ``(N, A, k)``): the clipped surrogate per agent and action dimension,
    summed over the dimensions, averaged over the active (step, agent) pairs (``active_masks``
    false: over every pair)."""
    ratio = (log_probs - old_log_probs).exp()
    adv = advantages.unsqueeze(-1)
    surrogate = torch.min(ratio * adv, ratio.clamp(1 - clip, 1 + clip) * adv).sum(-1)
    if not active_masks:
        return -surrogate.mean(), ratio
    return -(surrogate * active).sum() / active.sum().clamp(min=1.0), ratio


def mat_entropy(entropy: torch.Tensor, active: torch.Tensor, active_masks: bool = True) -> torch.Tensor:
    """The entropy bonus: each (step, agent)'s entropy summed over action dimensions, averaged over the
    active; ``active_masks`` false: MAT's ``entropy.mean()``, a mean over every (step, agent, dimension)."""
    if not active_masks:
        return entropy.mean()
    return (entropy.sum(-1) * active).sum() / active.sum().clamp(min=1.0)


ValueLoss = Callable[[torch.Tensor, TeamBatch], torch.Tensor]
"""``value_loss(new_values, minibatch)``: the critic's term (``harl.update.mat_values``)."""


@attrs.frozen
class TeamStats:
    """What one joint update reports (means over its minibatch steps)."""

    policy_loss: float
    value_loss: float
    entropy: float
    ratio: float
    grad_norm: float


class TransformerLearner:
    """Adam steps on the team's joint loss over epochs x minibatches of env steps."""

    def __init__(self, policy: MultiAgentTransformer, config: TransformerPPOConfig, generator: torch.Generator) -> None:
        self.policy = policy
        self.config = config
        self.generator = generator
        self.optimizer = torch.optim.Adam(policy.parameters(), lr=config.lr, eps=config.adam_eps,
                                          weight_decay=config.weight_decay)
        self.base_lr = config.lr

    def loss(self, mb: TeamBatch, value_loss: ValueLoss, value_loss_coef: float) -> tuple[torch.Tensor, ...]:
        """(loss, policy loss, value loss, entropy, mean ratio) of one minibatch."""
        log_probs, entropy, values = mat_decode.evaluate(self.policy, mb.obs, mb.actions, mb.avail, mb.orders)
        cfg = self.config
        policy_loss, ratio = mat_policy_loss(log_probs, mb.old_log_probs, mb.advantages, mb.active, cfg.clip,
                                             cfg.active_masks)
        mean_entropy = mat_entropy(entropy, mb.active, cfg.active_masks)
        v_loss = value_loss(values, mb)
        loss = policy_loss - cfg.entropy_coef * mean_entropy + value_loss_coef * v_loss
        return loss, policy_loss, v_loss, mean_entropy, ratio.mean()

    def update(self, batch: TeamBatch, value_loss: ValueLoss, value_loss_coef: float = 1.0) -> TeamStats:
        """``epochs`` passes over ``batch``, each a fresh permutation of its env steps cut into
        ``minibatches`` (the run's generator, on the CPU as every harl minibatch)."""
        cfg = self.config
        size = max(1, batch.size // cfg.minibatches)
        rows = []
        for _ in range(cfg.epochs):
            perm = torch.randperm(batch.size, generator=self.generator)
            for k in range(cfg.minibatches):
                idx = perm[k * size:(k + 1) * size].to(batch.obs.device)
                loss, *terms = self.loss(batch.select(idx), value_loss, value_loss_coef)
                norm = optimizer_step(self.optimizer, loss, self.policy.parameters(), cfg.max_grad_norm,
                                      report_norm=True)
                assert norm is not None
                rows.append(torch.stack([*(t.detach() for t in terms), norm.detach()]))
        policy_loss, v_loss, entropy, ratio, norm = torch.stack(rows).mean(0).tolist()
        if getattr(cfg, "order", "fixed") == "random":  # the next rollout's order (its steps record it)
            self.policy.set_order(draw_order(self.policy.n_agents, self.generator))
        return TeamStats(policy_loss, v_loss, entropy, ratio, norm)

    @torch.no_grad()
    def ratio(self, batch: TeamBatch) -> torch.Tensor:
        """``(N, A)`` each agent's new/old probability ratio (a product over action dimensions)."""
        log_probs, _, _ = mat_decode.evaluate(self.policy, batch.obs, batch.actions, batch.avail, batch.orders)
        return (log_probs - batch.old_log_probs).sum(-1).exp()


def _check(config: TransformerPPOConfig, built: Mapping[str, Any]) -> Iterable[tuple[list[str], str]]:
    if config.n_embd % config.n_head:
        yield (["updater", "objective", "n_head"],
               f"expected a divisor of n_embd ({config.n_embd}), got {config.n_head}")
    policy = built.get("policy")
    if policy is not None and getattr(policy, "recurrent", "none") != "none":
        yield (["policy", "recurrent"], f'"{policy.recurrent}": the transformer is its own policy and carries no '
               'GRU state ([updater.objective] sets its size); remove the key or set recurrent = "none"')


for _config in (MATConfig, MATDecConfig):
    register("updater.objective", _config, family="on_policy", check=_check,
             provides=("joint_loss", "transformer_policy"),
             requires={"critic": "transformer_values", "updater": "joint_update"},
             factory=lambda config, parts, agent: TransformerLearner(parts.policy, config, parts.generator),
             policy=transformer_policy)
