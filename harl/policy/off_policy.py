"""Actors of the off-policy family and the team that holds them.

Each actor acts in two ways: ``act(obs, avail, deterministic)`` (evaluation: the mean or
greedy action; ``deterministic=False`` explores as in training) and ``explore(obs, avail,
env_steps)`` (collection: exploration noise, sampling or epsilon-greedy).  Actions come
out as the env takes them: ``(B, k)`` floats (Box values, category indices).

- ``DeterministicActor`` (DDPG, TD3): tanh output scaled to the Box; Gaussian exploration.
- ``SquashedGaussianActor`` (SAC, Box): tanh-squashed reparameterised Gaussian.
- ``CategoricalActor`` (SAC, Discrete / MultiDiscrete): straight-through Gumbel-softmax
  one-hot samples for the critic, masked by ``avail``.
- ``DuelingQActor`` (D3QN): per-agent dueling Q network, epsilon-greedy.

The networks follow HARL's off-policy models: plain ``Linear -> activation`` stacks with
PyTorch's default initialisation (the Gumbel-softmax actor keeps the on-policy MLP with
LayerNorm, as HARL's discrete SAC policy does).
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from gymnasium import spaces
from torch import nn
from torch.nn import functional as F

from harl.errors import old_names
from harl.nets.heads import MASKED_LOGIT, add_up
from harl.nets.mlp import MLP, init_linear
from harl.nets.plain import EdgeLinear, masked_argmax, off_policy_encoder, plain_mlp, prefixed
from harl.policy.off_policy_stack import OffPolicyStack, group_off_policy

LOG_STD_MIN, LOG_STD_MAX = -20.0, 2.0
"""Clamp of the squashed Gaussian's log-std (HARL's and SpinningUp's bounds)."""


def box_bounds(space: spaces.Box, device: torch.device | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """(centre, half-range) of a bounded Box, flattened."""
    low = torch.as_tensor(np.asarray(space.low, dtype=np.float32).ravel(), device=device)
    high = torch.as_tensor(np.asarray(space.high, dtype=np.float32).ravel(), device=device)
    return (high + low) / 2, (high - low) / 2


SQUASHES = ("bounds", "act_limit")


def squash_range(space: spaces.Box, squash: str = "bounds") -> tuple[torch.Tensor, torch.Tensor]:
    """(centre, scale) of a squashed actor's ``centre + scale * tanh(u)``.

    ``bounds``: the Box's own, so every action is inside it.  ``act_limit``: HARL's
    SquashedGaussianPolicy, ``high[0] * tanh(u)`` in every dimension; the env clips what falls
    outside, so on MPE's [0, 1] Box the negative half of tanh's range acts as 0.
    """
    centre, half = box_bounds(space)
    if squash == "act_limit":
        return torch.zeros_like(centre), torch.full_like(half, float(np.asarray(space.high).ravel()[0]))
    return centre, half


def masked_uniform(avail: torch.Tensor | None, n: int, batch: int, device: torch.device,
                   generator: torch.Generator | None = None) -> torch.Tensor:
    """(batch,) category indices drawn uniformly among the available ones (all if ``avail`` is None)."""
    weights = torch.ones(batch, n) if avail is None else avail.float()
    # drawn where the generator lives (the CPU for a seeded one), then moved to ``device``
    where = generator.device if generator is not None else device
    return torch.multinomial(weights.to(where), 1, generator=generator).squeeze(1).to(device)


class DeterministicActor(nn.Module):
    """obs -> ``centre + half_range * tanh(mlp(obs))``: always inside the Box."""

    stack_trunk, stack_heads = "net", ()
    """How ``harl.policy.off_policy_stack`` runs the network: ``outputs(net(obs))``."""

    # registered buffers (register_buffer in __init__)
    centre: torch.Tensor
    half_range: torch.Tensor

    def __init__(self, obs_dim: int, space: spaces.Box, hidden_sizes: Sequence[int], activation: str,
                 input_norm: bool, expl_noise: float, encoder: nn.Module | None = None) -> None:
        """``encoder``: an image's feature extractor (``off_policy_encoder``), ``obs_dim`` its width."""
        super().__init__()
        centre, half = box_bounds(space)
        self.register_buffer("centre", centre)
        self.register_buffer("half_range", half)
        self.net = prefixed(encoder, plain_mlp([obs_dim, *hidden_sizes, centre.numel()], activation, "tanh", input_norm))
        self.expl_noise = expl_noise

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return self.outputs(self.net(obs))

    def outputs(self, out: torch.Tensor, avail: torch.Tensor | None = None) -> torch.Tensor:
        """The network's tanh output -> the action."""
        return self.centre + self.half_range * out

    def act(self, obs: torch.Tensor, avail: torch.Tensor | None, deterministic: bool) -> torch.Tensor:
        return self.act_from(self.forward(obs), deterministic)

    def explore(self, obs: torch.Tensor, avail: torch.Tensor | None, env_steps: int | None) -> torch.Tensor:
        return self.explore_from(self.forward(obs), env_steps)

    def act_from(self, action: torch.Tensor, deterministic: bool) -> torch.Tensor:
        """``act`` given ``outputs``' action (any leading axes: a stack's too)."""
        return action if deterministic else self.explore_from(action, None)

    def explore_from(self, action: torch.Tensor, env_steps: int | None) -> torch.Tensor:
        """The action plus Gaussian noise of std ``expl_noise * half_range``, clipped to the Box."""
        noisy = action + torch.randn_like(action) * self.expl_noise * self.half_range
        return torch.maximum(torch.minimum(noisy, self.centre + self.half_range), self.centre - self.half_range)


class SquashedGaussianActor(nn.Module):
    """SAC's Box actor: ``a = centre + half_range * tanh(u)``, ``u ~ N(mu(o), sigma(o))``
    (``half_range`` is the scale ``squash_range`` gives, HARL's ``act_limit`` under ``act_limit``)."""

    # registered buffers (register_buffer in __init__)
    centre: torch.Tensor
    half_range: torch.Tensor
    log_half_sum: torch.Tensor

    stack_trunk, stack_heads = "body", ("mu", "log_std")
    """How ``harl.policy.off_policy_stack`` runs the network: ``outputs(mu(x), log_std(x))``, ``x = body(obs)``."""

    def __init__(self, obs_dim: int, space: spaces.Box, hidden_sizes: Sequence[int], activation: str,
                 input_norm: bool, encoder: nn.Module | None = None, squash: str = "bounds") -> None:
        """``squash``: ``squash_range``'s, where ``tanh(u)`` is scaled to."""
        super().__init__()
        centre, half = squash_range(space, squash)
        self.register_buffer("centre", centre)
        self.register_buffer("half_range", half)
        self.register_buffer("log_half_sum", half.log().sum())
        dim = centre.numel()
        self.body = prefixed(encoder, plain_mlp([obs_dim, *hidden_sizes], activation, "tanh", input_norm))
        self.mu = EdgeLinear(hidden_sizes[-1], dim)
        self.log_std = EdgeLinear(hidden_sizes[-1], dim)

    def distribution(self, obs: torch.Tensor, avail: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """(mu, log_std) of the pre-squash Gaussian; ``sample`` draws from them."""
        x = self.body(obs)
        return self.outputs(self.mu(x), self.log_std(x))

    def outputs(self, mu: torch.Tensor, log_std: torch.Tensor,
                avail: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """The heads' outputs -> ``distribution``'s (mu, clamped log_std)."""
        return mu, log_std.clamp(LOG_STD_MIN, LOG_STD_MAX)

    def rsample(self, obs: torch.Tensor, avail: torch.Tensor | None = None,
                deterministic: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
        """(action (B, d) with a reparameterised gradient, log-density (B,) of that action)."""
        return self.sample(self.distribution(obs, avail), deterministic)

    def sample(self, params: Sequence[torch.Tensor],
               deterministic: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
        """``params``: ``distribution``'s (mu, log_std)."""
        mu, log_std = params
        std = log_std.exp()
        u = mu if deterministic else mu + std * torch.randn_like(mu)
        gauss = (-0.5 * ((u - mu) / std) ** 2 - log_std - 0.5 * math.log(2 * math.pi)).sum(-1)
        # log |d tanh(u)/du| = 2 (log 2 - u - softplus(-2u)), stable for large |u|
        squash = (2 * (math.log(2) - u - F.softplus(-2 * u))).sum(-1)
        action = self.centre + self.half_range * torch.tanh(u)
        return action, gauss - squash - self.log_half_sum

    def act(self, obs: torch.Tensor, avail: torch.Tensor | None, deterministic: bool) -> torch.Tensor:
        return self.act_from(self.distribution(obs, avail), deterministic)

    def explore(self, obs: torch.Tensor, avail: torch.Tensor | None, env_steps: int | None) -> torch.Tensor:
        return self.explore_from(self.distribution(obs, avail), env_steps)

    def act_from(self, params: Sequence[torch.Tensor], deterministic: bool) -> torch.Tensor:
        """``act`` given ``distribution``'s (mu, log_std) (any leading axes: a stack's too)."""
        return self.sample(params, deterministic)[0]

    def explore_from(self, params: Sequence[torch.Tensor], env_steps: int | None) -> torch.Tensor:
        return self.sample(params)[0]


class CategoricalActor(nn.Module):
    """SAC's Discrete / MultiDiscrete actor; ``avail`` concatenates the sub-actions' masks.

    ``rsample`` returns concatenated one-hot vectors (the critic's input format) with a
    straight-through Gumbel-softmax gradient, as HARL's HASAC does for discrete actions.
    """

    stack_trunk, stack_heads = "base.body", ("logits",)
    """How ``harl.policy.off_policy_stack`` runs the network: ``outputs(logits(base(obs)), avail)``."""

    def __init__(self, obs_dim: int, space: spaces.Discrete | spaces.MultiDiscrete, hidden_sizes: Sequence[int],
                 activation: str, input_norm: bool, gain: float, encoder: nn.Module | None = None) -> None:
        super().__init__()
        if isinstance(space, spaces.Discrete):
            self.sizes = [int(space.n)]
        else:
            self.sizes = [int(n) for n in np.asarray(space.nvec).ravel()]
        mlp = MLP(obs_dim, hidden_sizes, activation, input_norm)
        self.base = prefixed(encoder, mlp)
        self.logits = init_linear(nn.Linear(mlp.out_dim, sum(self.sizes)), gain)

    def log_probs(self, obs: torch.Tensor, avail: torch.Tensor | None) -> list[torch.Tensor]:
        return self.outputs(self.logits(self.base(obs)), avail)

    def outputs(self, logits: torch.Tensor, avail: torch.Tensor | None = None) -> list[torch.Tensor]:
        """The logits -> the sub-actions' log-probabilities, unavailable categories masked."""
        logits = logits.float()  # fp32 even under bf16 autocast
        if avail is not None:
            logits = logits.masked_fill(avail == 0, MASKED_LOGIT)
        return [torch.log_softmax(part, -1) for part in logits.split(self.sizes, -1)]

    def distribution(self, obs: torch.Tensor, avail: torch.Tensor | None = None) -> list[torch.Tensor]:
        """The sub-actions' log-probabilities; ``sample`` draws from them."""
        return self.log_probs(obs, avail)

    def rsample(self, obs: torch.Tensor, avail: torch.Tensor | None = None,
                deterministic: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
        """(one-hot actions (B, sum n) with a straight-through gradient, log-probability (B,))."""
        return self.sample(self.log_probs(obs, avail), deterministic)

    def sample(self, log_probs: Sequence[torch.Tensor], deterministic: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
        onehots, terms = [], []
        for log_p in log_probs:
            if deterministic:
                hard = F.one_hot(log_p.argmax(-1), log_p.shape[-1]).to(log_p.dtype)
                onehots.append(hard)
            else:
                gumbel = -torch.empty_like(log_p).exponential_().log()
                soft = torch.softmax(log_p + gumbel, -1)
                hard = F.one_hot(soft.argmax(-1), log_p.shape[-1]).to(log_p.dtype)
                onehots.append(hard - soft.detach() + soft)
            terms.append((onehots[-1] * log_p).sum(-1))
        return torch.cat(onehots, -1), add_up(terms)

    def act(self, obs: torch.Tensor, avail: torch.Tensor | None, deterministic: bool) -> torch.Tensor:
        return self.act_from(self.log_probs(obs, avail), deterministic)

    def act_from(self, log_probs: Sequence[torch.Tensor], deterministic: bool) -> torch.Tensor:
        """``act`` given the log-probabilities (any leading axes: a stack's too): category indices."""
        picks = []
        for log_p in log_probs:
            if deterministic:
                picks.append(log_p.argmax(-1))
            else:
                gumbel = -torch.empty_like(log_p).exponential_().log()
                picks.append((log_p + gumbel).argmax(-1))
        return torch.stack(picks, -1).float()

    def explore(self, obs: torch.Tensor, avail: torch.Tensor | None, env_steps: int | None) -> torch.Tensor:
        return self.act(obs, avail, deterministic=False)

    def explore_from(self, log_probs: Sequence[torch.Tensor], env_steps: int | None) -> torch.Tensor:
        return self.act_from(log_probs, deterministic=False)


class DuelingQActor(nn.Module):
    """D3QN's per-agent Q: ``Q(o, a) = V(o) + A(o, a) - mean_a A(o, a)``; epsilon-greedy exploration.

    Epsilon falls linearly from ``epsilon_start`` to ``epsilon_finish`` over the first
    ``epsilon_anneal_steps`` env steps after warm-up (``env_steps`` counts from the run's start).
    """

    def __init__(self, obs_dim: int, space: spaces.Discrete, hidden_sizes: Sequence[int], activation: str,
                 input_norm: bool, dueling_hidden_sizes: Sequence[int], dueling_activation: str,
                 epsilon: tuple[float, float, int, int], encoder: nn.Module | None = None,
                 epsilon_coin: str = "per_env") -> None:
        super().__init__()
        self.n = int(space.n)
        self.per_step_coin = epsilon_coin == "per_step"
        self.base = prefixed(encoder, plain_mlp([obs_dim, *hidden_sizes], activation, activation, input_norm))
        self.value = plain_mlp([hidden_sizes[-1], *dueling_hidden_sizes, 1], dueling_activation)
        self.advantage = plain_mlp([hidden_sizes[-1], *dueling_hidden_sizes, self.n], dueling_activation)
        self.epsilon_start, self.epsilon_finish, self.anneal_steps, self.warmup_steps = epsilon

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        x = self.base(obs)
        adv = self.advantage(x)
        return self.value(x) + adv - adv.mean(-1, keepdim=True)

    def greedy(self, obs: torch.Tensor, avail: torch.Tensor | None) -> torch.Tensor:
        return masked_argmax(self.forward(obs), avail).unsqueeze(-1).float()

    def epsilon(self, env_steps: int | None) -> float:
        if env_steps is None or self.anneal_steps <= 0:
            return self.epsilon_finish
        frac = min(1.0, max(0.0, (env_steps - self.warmup_steps) / self.anneal_steps))
        return self.epsilon_start + frac * (self.epsilon_finish - self.epsilon_start)

    def act(self, obs: torch.Tensor, avail: torch.Tensor | None, deterministic: bool) -> torch.Tensor:
        return self.greedy(obs, avail) if deterministic else self.explore(obs, avail, None)

    def explore(self, obs: torch.Tensor, avail: torch.Tensor | None, env_steps: int | None) -> torch.Tensor:
        """Per row: a uniformly random available action with probability epsilon, else greedy
        (``per_step`` coin: one draw decides for every row, as HARL's HAD3QN does)."""
        greedy = self.greedy(obs, avail).squeeze(-1)
        batch = obs.shape[0]
        random = masked_uniform(avail, self.n, batch, obs.device).to(greedy.dtype)
        coin = torch.rand(1 if self.per_step_coin else batch, device=obs.device)
        pick = (coin < self.epsilon(env_steps)).expand(batch)
        return torch.where(pick, random, greedy).unsqueeze(-1)


class KeptForward:
    """An actor's forward pass from the start of an actor round, kept for the agent's own loss.

    An agent's round-start action (what the others see) and its own actor loss run the same
    network on the same observations, and its parameters cannot change in between (only
    its own step changes them), so the forward pass is done once, with its graph, and
    reused.  ``take`` recomputes when the observations or the parameters differ.
    """

    def __init__(self, module: nn.Module) -> None:
        self.module = module
        self.kept: tuple[torch.Tensor, int, Any] | None = None

    def _version(self) -> int:
        return sum(p._version for p in self.module.parameters())

    def keep(self, obs: torch.Tensor, output: Any) -> None:
        self.kept = (obs, self._version(), output)

    def take(self, obs: torch.Tensor, compute: Callable[[], Any]) -> Any:
        """The kept output for ``obs`` if still valid (then dropped), else ``compute()``."""
        kept, self.kept = self.kept, None
        if kept is not None and kept[0] is obs and kept[1] == self._version():
            return kept[2]
        return compute()


class OffPolicyActors(nn.Module):
    """One actor per agent, with polyak-averaged target copies where the objective uses them.

    Meets what the ``Evaluator`` needs: ``n_agents`` and ``act(obs, avail, deterministic)``.
    ``batch_agents`` (``[policy] batch_agents``): agents whose actors stack act in one call
    (``harl.policy.off_policy_stack``), in collection and evaluation alike.
    """

    def __init__(self, actors: Sequence[nn.Module], with_targets: bool, batch_agents: bool = False) -> None:
        super().__init__()
        self.n_agents = len(actors)
        self.actors = nn.ModuleList(actors)
        self.targets: nn.ModuleList | None = None
        if with_targets:
            self.targets = copy.deepcopy(self.actors)
            self.targets.requires_grad_(False)
        self.groups: list[list[int]] | None = None
        """``[policy] batch_agents``: the agents that act as one call (a group of one acts alone)."""
        self.stacks: dict[int, OffPolicyStack] = {}
        """First agent of a group of several -> their stack."""
        if batch_agents and self.n_agents > 1:
            self.groups = group_off_policy(list(self.actors))
            self.stacks = {g[0]: OffPolicyStack([self.actors[i] for i in g]) for g in self.groups if len(g) > 1}

    def initial_hidden(self, n_envs: int, device: torch.device | str = "cpu") -> None:
        """Off-policy actors are feed-forward: no recurrent state."""
        return None

    def export_actors(self) -> list[nn.Module]:
        """Each agent's actor, in agent order: what ``harl export`` ships."""
        return list(self.actors)

    @torch.no_grad()
    def act(self, obs: Sequence[torch.Tensor], avail: Sequence[torch.Tensor | None] | None,
            deterministic: bool = True, hidden: None = None, starts: torch.Tensor | None = None
            ) -> tuple[list[torch.Tensor], None]:
        """Every agent's action; ``hidden`` and ``starts`` exist for the Evaluator's recurrent case."""
        if self.groups is not None:
            return self._batched("act", obs, avail, deterministic), None
        return [actor.act(obs[i], None if avail is None else avail[i], deterministic)  # type: ignore[operator]
                for i, actor in enumerate(self.actors)], None

    @torch.no_grad()
    def explore(self, obs: Sequence[torch.Tensor], avail: Sequence[torch.Tensor | None] | None,
                env_steps: int) -> list[torch.Tensor]:
        if self.groups is not None:
            return self._batched("explore", obs, avail, env_steps)
        return [actor.explore(obs[i], None if avail is None else avail[i], env_steps)  # type: ignore[operator]
                for i, actor in enumerate(self.actors)]

    def _batched(self, method: str, obs: Sequence[torch.Tensor], avail: Sequence[torch.Tensor | None] | None,
                 arg: Any) -> list[torch.Tensor]:
        """``method`` (``act`` or ``explore``) of every agent, each group of stacked actors in one call."""
        assert self.groups is not None
        out: list[torch.Tensor] = [torch.empty(0)] * self.n_agents
        for group in self.groups:
            masks = None if avail is None else [avail[i] for i in group]
            stack = self.stacks.get(group[0])
            if stack is None:
                out[group[0]] = getattr(self.actors[group[0]], method)(obs[group[0]], None if masks is None else masks[0], arg)
                continue
            mask = None if masks is None or masks[0] is None else torch.stack(masks)  # type: ignore[arg-type]
            for i, action in zip(group, getattr(stack, method)(torch.stack([obs[i] for i in group]), mask, arg)):
                out[i] = action
        return out


def policy_builder(make_actor: Callable[..., nn.Module], with_targets: bool,
                 extra: Callable[[Any], dict[str, Any]] = lambda parts: {}) -> Callable[[Any, Any], OffPolicyActors]:
    """An off-policy objective's team: ``make_actor`` per agent, with target copies if it uses them.

    ``extra(parts)``: further keyword arguments of ``make_actor`` (d3qn's epsilon schedule and warm-up length).
    """
    def build(config: Any, parts: Any) -> OffPolicyActors:
        policy, actors = parts.policy_config, []
        for i in range(parts.n_agents):
            encoder, width = off_policy_encoder(parts.obs_spaces[i], policy.encoder, policy.channel_order,
                                                policy.hidden_sizes[0], policy.activation, "policy", parts.source)
            kwargs = extra(parts) if encoder is None else {**extra(parts), "encoder": encoder}
            actors.append(make_actor(width, parts.act_spaces[i], policy, config, i, parts.source, **kwargs))
        return OffPolicyActors(actors, with_targets, policy.batch_agents)

    return build


if not TYPE_CHECKING:  # mypy does not see old names, so harl's own code cannot use one
    __getattr__ = old_names(__name__, {"OffPolicyTeam": ("OffPolicyActors", OffPolicyActors)})  # a team: agents now
