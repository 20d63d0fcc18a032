"""The state-value critic V(s) of the on-policy family: network, value loss, learner.

EP state: one global state per env, one value per env, the team reward.
FP state: a state per agent (the global state plus the agent's one-hot id), a value per
agent, each agent's own reward.  The choice is this config's ``state_type`` and nowhere else.
"""

from __future__ import annotations

import attrs
import torch
from torch import nn

from harl.policy.networks import ACTIVATIONS, MLP, init_linear
from harl.returns.value_norm import ValueNorm
from harl.settings import each_positive, in_range, kind_field, one_of, positive, setting


@attrs.frozen
class VCriticConfig:
    """``[critic] kind = "v"``: V(s) trained on GAE returns with a clipped Huber loss."""

    kind: str = kind_field("v")
    state_type: str = setting("EP", "EP: one global state/value per env; FP: one per agent", one_of(("EP", "FP")))
    hidden_sizes: tuple[int, ...] = setting((128, 128), "widths of the hidden layers", each_positive())
    activation: str = setting("relu", "hidden activation", one_of(ACTIVATIONS))
    input_norm: bool = setting(True, "LayerNorm on the raw state")
    lr: float = setting(5e-4, "Adam learning rate", positive())
    adam_eps: float = setting(1e-5, "Adam epsilon", positive())
    epochs: int = setting(5, "passes over the rollout per iteration", positive())
    minibatches: int = setting(1, "minibatches per pass", positive())
    value_loss_coef: float = setting(1.0, "weight of the value loss", positive())
    clip_value_loss: bool = setting(True, "PPO-style clipping of the value change")
    value_clip: float = setting(0.2, "clip range of the value change (normalised units)", positive())
    huber_delta: float = setting(10.0, "Huber loss threshold; 0 means squared error", in_range(0, None))
    max_grad_norm: float = setting(10.0, "gradient-norm clip; 0 disables", in_range(0, None))
    value_norm: bool = setting(True, "normalise targets with a running mean/std (HARL's ValueNorm)")


class VCritic(nn.Module):
    """V(s) -> values in env units (denormalised), shape ``(...,)`` for EP, ``(..., A)`` for FP."""

    def __init__(self, state_dim: int, n_agents: int, config: VCriticConfig) -> None:
        super().__init__()
        self.fp = config.state_type == "FP"
        self.n_agents = n_agents
        in_dim = state_dim + (n_agents if self.fp else 0)
        self.base = MLP(in_dim, config.hidden_sizes, config.activation, config.input_norm)
        self.out = init_linear(nn.Linear(self.base.out_dim, 1), 1.0)
        self.normalizer = ValueNorm() if config.value_norm else None
        self.register_buffer("agent_ids", torch.eye(n_agents))

    def inputs(self, state: torch.Tensor) -> torch.Tensor:
        """The critic's input: the state itself (EP) or one copy per agent with its id (FP)."""
        if not self.fp:
            return state
        lead = state.shape[:-1]
        copies = state.unsqueeze(-2).expand(*lead, self.n_agents, state.shape[-1])
        ids = self.agent_ids.expand(*lead, self.n_agents, self.n_agents)
        return torch.cat([copies, ids], -1)

    def normalized(self, state: torch.Tensor) -> torch.Tensor:
        """Raw network output (normalised units when value normalisation is on)."""
        return self.out(self.base(self.inputs(state))).squeeze(-1)

    @torch.no_grad()
    def value(self, state: torch.Tensor) -> torch.Tensor:
        v = self.normalized(state)
        return v if self.normalizer is None else self.normalizer.denormalize(v)

    def normalize_targets(self, x: torch.Tensor) -> torch.Tensor:
        return x if self.normalizer is None else self.normalizer.normalize(x)


def huber(error: torch.Tensor, delta: float) -> torch.Tensor:
    """0.5 e^2 inside [-delta, delta], linear outside; plain 0.5 e^2 when delta is 0."""
    if delta <= 0:
        return 0.5 * error**2
    a = error.abs()
    return torch.where(a <= delta, 0.5 * error**2, delta * (a - 0.5 * delta))


def value_loss(new: torch.Tensor, old: torch.Tensor, target: torch.Tensor,
               clip: float | None, huber_delta: float) -> torch.Tensor:
    """Per-sample value loss; with ``clip`` the pessimistic max of plain and clipped losses."""
    loss = huber(target - new, huber_delta)
    if clip is None:
        return loss
    clipped = old + (new - old).clamp(-clip, clip)
    return torch.max(loss, huber(target - clipped, huber_delta))


@attrs.frozen
class CriticStats:
    value_loss: float
    grad_norm: float


class VCriticLearner:
    """Fits the critic to the returns of one rollout (epochs x minibatches)."""

    def __init__(self, critic: VCritic, config: VCriticConfig, generator: torch.Generator) -> None:
        self.critic = critic
        self.config = config
        self.generator = generator
        self.optimizer = torch.optim.Adam(critic.parameters(), lr=config.lr, eps=config.adam_eps)
        self.base_lr = config.lr

    def update(self, states: torch.Tensor, old_values: torch.Tensor, returns: torch.Tensor) -> CriticStats:
        """``states`` (N, ds); ``old_values`` and ``returns`` (N,) or (N, A), env units."""
        cfg, critic = self.config, self.critic
        old_norm = critic.normalize_targets(old_values)  # normaliser as at collection time
        n = states.shape[0]
        size = max(1, n // cfg.minibatches)
        losses, norms = [], []
        for _ in range(cfg.epochs):
            perm = torch.randperm(n, generator=self.generator, device="cpu").to(states.device)
            for k in range(cfg.minibatches):
                idx = perm[k * size:(k + 1) * size]
                target = returns[idx]
                if critic.normalizer is not None:
                    critic.normalizer.update(target)
                target = critic.normalize_targets(target)
                new = critic.normalized(states[idx])
                clip = cfg.value_clip if cfg.clip_value_loss else None
                loss = value_loss(new, old_norm[idx], target, clip, cfg.huber_delta).mean()
                self.optimizer.zero_grad(set_to_none=True)
                (loss * cfg.value_loss_coef).backward()
                norms.append(clip_grads(critic.parameters(), cfg.max_grad_norm))
                self.optimizer.step()
                losses.append(loss.detach())
        return CriticStats(float(torch.stack(losses).mean()), float(torch.stack(norms).mean()))


def clip_grads(parameters, max_norm: float) -> torch.Tensor:  # type: ignore[no-untyped-def]
    """Clip to ``max_norm`` (0: no clip) and return the pre-clip norm."""
    params = [p for p in parameters if p.grad is not None]
    if max_norm > 0:
        return nn.utils.clip_grad_norm_(params, max_norm)
    return torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(p.grad) for p in params]))
