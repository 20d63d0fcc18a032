"""The trust-region objective for one agent, weighted by the HA factor (HATRPO).

    maximise   L(θ) = mean_active[ factor * r_θ * A ]
    subject to mean_active[ KL(π_old || π_θ) ] <= kl_threshold

One natural-gradient step per iteration, no optimiser and no learning rate:

1. ``g = ∇L`` at the rollout policy (where ``r = 1``);
2. the direction ``x ≈ (F + damping I)⁻¹ g`` by ``cg_iterations`` of conjugate gradient,
   where ``F`` is the Hessian of the mean KL at the current policy (the Fisher matrix),
   applied to vectors as ``Jᵀ M J v`` (see ``fisher_operator``);
3. the full step ``x · sqrt(2 kl_threshold / xᵀFx)``, which reaches the KL bound on the
   quadratic model of the KL;
4. a backtracking line search: the fractions 1, c, c², ... (``backtrack_coef`` = c, at
   most ``ls_step`` tries) until the surrogate really improves, by at least
   ``accept_ratio`` of the linear prediction, with the real KL under the bound.  When no
   fraction passes, the parameters are restored exactly.

The math is in module-level functions (``conjugate_gradient``, ``fisher_vector_product``,
``line_search``) that tests call directly.  Box and Discrete actions only, as in HARL.  The
Gaussian KL is exact; the categorical one is HARL's ``approx_categorical_kl`` by default
(``categorical_kl = "approx"``) or the exact KL (``"exact"``).  Both are averaged, like the
surrogate, over the agent's active samples.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import attrs
import torch
from torch import nn

from harl.buffers.rollout import AgentBatch
from harl.errors import ConfigError
from harl.nets.heads import CategoricalHead, add_up
from harl.policy.on_policy import Actor
from harl.registry import register
from harl.settings import in_range, kind_field, one_of, positive, setting
from harl.update.common import aggregate_ratio, masked_mean


@attrs.frozen
class TRPOConfig:
    """``[updater.objective] kind = "trpo"``: one KL-bounded natural-gradient step per iteration."""

    kind: str = kind_field("trpo")
    kl_threshold: float = setting(0.01, "trust region: the largest mean KL(old || new) a step may reach", positive())
    ls_step: int = setting(10, "line-search tries; each shrinks the step by backtrack_coef", positive())
    backtrack_coef: float = setting(0.8, "step shrink factor per line-search try", in_range(0, 1, low_open=True, high_open=True))
    accept_ratio: float = setting(0.5, "accept a step whose real improvement is at least this fraction of the predicted one", in_range(0, 1))
    cg_iterations: int = setting(10, "conjugate-gradient iterations for the natural-gradient direction", positive())
    damping: float = setting(0.1, "added to the Fisher matrix's diagonal: (F + damping I) x = g", in_range(0, None))
    action_aggregation: str = setting("prod", "how per-dimension ratios combine: prod or mean", one_of(("prod", "mean")))
    categorical_kl: str = setting(
        "approx", "Discrete trust region's KL: approx (HARL: sum_a exp(d) - 1 - d, d = log pi_new - log pi_old) "
        "or exact (sum_a pi_old d)", one_of(("approx", "exact")))


# --------------------------------------------------------------------------- flat parameters


def flat_params(params: Sequence[torch.Tensor]) -> torch.Tensor:
    """A copy of the parameters' values as one vector."""
    return torch.cat([p.detach().reshape(-1) for p in params])


@torch.no_grad()
def set_flat_params(params: Sequence[torch.Tensor], flat: torch.Tensor) -> None:
    """Write the vector ``flat`` (as made by ``flat_params``) back into the parameters."""
    offset = 0
    for p in params:
        n = p.numel()
        p.copy_(flat[offset:offset + n].view_as(p))
        offset += n


def flat_grad(output: torch.Tensor, params: Sequence[torch.Tensor],
              create_graph: bool = False) -> torch.Tensor:
    """The gradient of the scalar ``output`` as one vector (zeros for unused parameters)."""
    grads = torch.autograd.grad(output, list(params), create_graph=create_graph, allow_unused=True)
    return torch.cat([(torch.zeros_like(p) if g is None else g).reshape(-1)
                      for g, p in zip(grads, params)])


# --------------------------------------------------------------------------- the math


def approx_categorical_kl(old: tuple[torch.Tensor, ...], new: tuple[torch.Tensor, ...]) -> torch.Tensor:
    """``(batch,)`` HARL's ``kl_approx``: ``sum_a [exp(d_a) - 1 - d_a]``, ``d = log pi_new - log pi_old``.

    Every action counts alike (not weighted by pi_old), so a step reaches ``kl_threshold``
    with a smaller true KL than under the exact divergence.  Its Hessian at ``new = old``
    is ``sum_a (∂d_a)^2``.
    """
    terms = []
    for z0, z1 in zip(old, new):
        d = torch.log_softmax(z1, -1) - torch.log_softmax(z0, -1)
        terms.append((d.exp() - 1 - d).sum(-1))
    return add_up(terms)


def conjugate_gradient(matvec: Callable[[torch.Tensor], torch.Tensor], b: torch.Tensor,
                       iterations: int = 10, residual_tol: float = 1e-10) -> torch.Tensor:
    """Approximately solve ``A x = b`` for a symmetric positive-definite ``A`` given as ``matvec``.

    Stops early once the squared residual falls below ``residual_tol``.
    """
    x = torch.zeros_like(b)
    r = b.clone()
    p = b.clone()
    rr = r @ r
    for _ in range(iterations):
        if float(rr) < residual_tol:
            break
        ap = matvec(p)
        alpha = rr / (p @ ap)
        x += alpha * p
        r -= alpha * ap
        new_rr = r @ r
        p = r + (new_rr / rr) * p
        rr = new_rr
    return x


KLOf = Callable[[tuple[torch.Tensor, ...]], torch.Tensor]
"""Distribution parameters -> mean KL from the frozen current policy (smallest, 0, at the current ones)."""


def fisher_operator(model: nn.Module, inputs: tuple[Any, ...], kl_of: KLOf,
                    damping: float) -> Callable[[torch.Tensor], torch.Tensor]:
    """``v -> (H + damping I) v``, ``H`` the Hessian of ``kl_of(model(*inputs))`` in the parameters.

    ``model(*inputs)`` gives the distribution parameters φ(θ) and ``kl_of(φ)`` the mean KL
    from the current policy, frozen.  That KL is smallest at the current φ, so its gradient
    in φ vanishes there and its Hessian in θ (the Fisher matrix) is exactly ``Jᵀ M J``, with
    ``J = ∂φ/∂θ`` and ``M = ∂²KL/∂φ²``.  A product then costs one forward-mode pass (``J v``),
    an elementwise Hessian-vector product in φ (``M J v``) and one ordinary backward
    (``Jᵀ ·``): about a third of differentiating the network twice, whose LayerNorms make
    double backward slow.  ``v`` and the result are flat, in ``model.parameters()`` order
    (trainable ones only).
    """
    named = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    params = [p for _, p in named]
    frozen = {n: p.detach() for n, p in named}
    with torch.backends.cudnn.flags(enabled=False):  # cuDNN's GRU has no forward-mode AD
        outputs = model(*inputs)
    phi = tuple(o.detach().requires_grad_() for o in outputs)
    grad_phi = torch.autograd.grad(kl_of(phi), phi, create_graph=True)

    def call(tensors: dict[str, torch.Tensor]) -> tuple[torch.Tensor, ...]:
        return torch.func.functional_call(model, tensors, inputs)

    def product(v: torch.Tensor) -> torch.Tensor:
        tangents, offset = {}, 0
        for name, p in named:
            tangents[name] = v[offset:offset + p.numel()].view_as(p)
            offset += p.numel()
        with torch.backends.cudnn.flags(enabled=False), warnings.catch_warnings():
            # torch loads its forward-mode rules on first use through torch.jit.script (deprecated)
            warnings.filterwarnings("ignore", ".*torch.jit.script", DeprecationWarning)
            jv = torch.func.jvp(call, (frozen,), (tangents,))[1]  # (output, jvp): no has_aux
        mjv = torch.autograd.grad(grad_phi, phi, grad_outputs=jv, retain_graph=True, allow_unused=True)
        mjv = tuple(torch.zeros_like(f) if m is None else m for m, f in zip(mjv, phi))
        grads = torch.autograd.grad(outputs, params, grad_outputs=mjv, retain_graph=True, allow_unused=True)
        fv = torch.cat([(torch.zeros_like(p) if g is None else g).reshape(-1) for g, p in zip(grads, params)])
        return fv + damping * v

    return product


def fisher_vector_product(model: nn.Module, inputs: tuple[Any, ...], kl_of: KLOf, v: torch.Tensor,
                          damping: float = 0.0) -> torch.Tensor:
    """``(F + damping I) v``, ``F`` the Hessian of the KL at the current parameters (see ``fisher_operator``)."""
    return fisher_operator(model, inputs, kl_of, damping)(v)


@attrs.frozen
class LineSearchResult:
    accepted: bool
    fraction: float
    """Fraction of the full step that was taken (0 when rejected)."""
    improvement: float
    """Surrogate gain of the accepted step (0 when rejected)."""
    kl: float
    """Mean KL of the accepted step (0 when rejected)."""


@torch.no_grad()
def line_search(params: Sequence[torch.Tensor], full_step: torch.Tensor, expected_improve: float,
                surrogate: Callable[[], torch.Tensor], kl: Callable[[], torch.Tensor],
                kl_threshold: float, steps: int = 10, backtrack_coef: float = 0.8,
                accept_ratio: float = 0.5) -> LineSearchResult:
    """Backtrack from the full step until a fraction of it really improves the surrogate.

    ``surrogate()`` and ``kl()`` evaluate the objective and the mean KL to the starting
    policy at the parameters' current values; ``expected_improve`` is the linear model's
    gain of the full step (``g · full_step``).  A fraction ``f`` is accepted when the KL
    stays under ``kl_threshold``, the surrogate gain is positive and at least
    ``accept_ratio · f · expected_improve``.  If none of ``steps`` fractions is accepted,
    the parameters are restored to their exact starting values.
    """
    start = flat_params(params)
    base = float(surrogate())
    fraction = 1.0
    for _ in range(steps):
        set_flat_params(params, start + fraction * full_step)
        improvement = float(surrogate()) - base
        divergence = float(kl())
        if (divergence < kl_threshold and improvement > 0
                and improvement > accept_ratio * fraction * expected_improve):
            return LineSearchResult(True, fraction, improvement, divergence)
        fraction *= backtrack_coef
    set_flat_params(params, start)
    return LineSearchResult(False, 0.0, 0.0, 0.0)


# --------------------------------------------------------------------------- the learner


@attrs.frozen
class TRPOStats:
    """What one agent's TRPO step reports."""

    policy_loss: float
    """Minus the surrogate after the step."""
    entropy: float
    ratio: float
    """Mean new/old probability ratio after the step."""
    grad_norm: float
    """Norm of the surrogate's gradient."""
    factor: float
    """Mean of the HA factor this agent was weighted by (1 for MA updates)."""
    kl: float
    """Mean KL(old || new) of the step taken (0 when the line search rejected it)."""
    step_fraction: float
    """Fraction of the full natural-gradient step taken (0: rejected, parameters restored)."""


class TRPOLearner:
    """Updates one actor by a trust-region step; ``ratio`` tells the updater how far it moved."""

    optimizer = None
    """No optimiser: the step size comes from the KL bound (the updater skips its learning rate)."""
    base_lr = 0.0

    def __init__(self, actor: Actor, config: TRPOConfig, generator: torch.Generator) -> None:
        head = actor.head
        if isinstance(head, CategoricalHead) and head.action_dim > 1:
            raise ConfigError(
                'updater.objective.kind: "trpo" handles Box and Discrete actions, but an agent '
                f"has MultiDiscrete({head.sizes}) actions (HARL's HATRPO refuses them too); "
                'use "ppo" or "a2c" for this team'
            )
        self.actor = actor
        self.config = config
        self.generator = generator
        self.params = [p for p in actor.parameters() if p.requires_grad]
        approx = isinstance(head, CategoricalHead) and config.categorical_kl == "approx"
        self.kl = approx_categorical_kl if approx else actor.kl

    def _surrogate(self, batch: AgentBatch, factor: torch.Tensor
                   ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(surrogate, per-sample entropy, ratio) at the actor's current parameters."""
        log_probs, entropy = self.actor.evaluate(batch.obs, batch.actions, batch.avail,
                                                 batch.hidden, batch.starts)
        ratio = aggregate_ratio(log_probs - batch.old_log_probs, self.config.action_aggregation)
        return masked_mean(factor * ratio * batch.advantages, batch.active), entropy, ratio

    def _distribution(self, batch: AgentBatch) -> tuple[torch.Tensor, ...]:
        return self.actor.distribution(batch.obs, batch.avail, batch.hidden, batch.starts)

    def update(self, batch: AgentBatch, factor: torch.Tensor) -> TRPOStats:
        cfg = self.config
        surrogate, _, _ = self._surrogate(batch, factor)
        grad = flat_grad(surrogate, self.params)
        with torch.no_grad():
            old = tuple(t.detach() for t in self._distribution(batch))

        def kl_of(new: tuple[torch.Tensor, ...]) -> torch.Tensor:
            return masked_mean(self.kl(old, new).unsqueeze(-1), batch.active)

        def mean_kl() -> torch.Tensor:
            return kl_of(self._distribution(batch))

        fisher = fisher_operator(self.actor, (batch.obs, batch.avail, batch.hidden, batch.starts),
                                 kl_of, cfg.damping)
        direction = conjugate_gradient(fisher, grad, cfg.cg_iterations)
        curvature = float(direction @ fisher(direction))
        del fisher  # frees the network graph it keeps for its products
        if math.isfinite(curvature) and curvature > 0:
            full_step = direction * math.sqrt(2 * cfg.kl_threshold / curvature)
            result = line_search(self.params, full_step, float(grad @ full_step),
                                 lambda: self._surrogate(batch, factor)[0], mean_kl,
                                 cfg.kl_threshold, cfg.ls_step, cfg.backtrack_coef, cfg.accept_ratio)
        else:  # a zero gradient (e.g. all advantages 0): nothing to do
            result = LineSearchResult(False, 0.0, 0.0, 0.0)
        with torch.no_grad():
            after, entropy, ratio = self._surrogate(batch, factor)
            mean_entropy = masked_mean(entropy.unsqueeze(-1), batch.active)
        return TRPOStats(-float(after), float(mean_entropy), float(ratio.mean()),
                         float(torch.linalg.vector_norm(grad)), float(factor.mean()),
                         result.kl, result.fraction)

    @torch.no_grad()
    def ratio(self, batch: AgentBatch) -> torch.Tensor:
        """(N, 1) new/old probability ratio of the actions in ``batch`` under the current actor."""
        log_probs, _ = self.actor.evaluate(batch.obs, batch.actions, batch.avail, batch.hidden, batch.starts)
        return aggregate_ratio(log_probs - batch.old_log_probs, self.config.action_aggregation)


register("updater.objective", TRPOConfig, family="on_policy", requires={"critic": "state_values"},
         factory=lambda config, parts, agent: TRPOLearner(parts.policy.actors[agent], config, parts.generator))
