"""Decoding with a Multi-Agent Transformer (``harl.policy.mat``): plain functions of the network.

Acting decodes auto-regressively, one agent per decoder pass, each agent's action entering the next
agent's token (``autoregressive``); the update decodes every agent in one pass from the stored
actions (teacher forcing, ``teacher_forced``), which gives the same distributions for the same
actions (``tests/mat``).  MAT-Dec decodes in one pass either way: no agent reads another.

``act`` and ``evaluate`` take and give agents in the env's order: with ``orders`` ``(B, A)`` each
row is decoded in its own order (``order = "episode"``, ``permute_rows``), else in the network's
``order``.  ``act`` encodes once: its values are the encoder's (what MAT's ``get_actions`` returns
beside the actions), the critic's values of the step.

Facts from PKU-MARL/Multi-Agent-Transformer (``mat/algorithms/utils/transformer_act.py``), written
anew: masked actions get logit -1e10; a Box action is a Gaussian around the decoder's output.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from harl.policy.mat import MASKED_LOGIT, MultiAgentTransformer

Permute = Callable[[torch.Tensor], torch.Tensor]


def permute_rows(x: torch.Tensor, orders: torch.Tensor) -> torch.Tensor:
    """``(B, A, ...)`` with row ``b``'s agents taken in ``orders[b]`` (``(B, A)``): ``y[b, p] = x[b, orders[b, p]]``."""
    index = orders.view(*orders.shape, *([1] * (x.dim() - 2))).expand_as(x)
    return x.gather(1, index.to(x.device))


def permutations(net: MultiAgentTransformer, orders: torch.Tensor | None) -> tuple[Permute, Permute]:
    """(env order -> decoding order, decoding order -> env order) of ``(B, A, ...)`` tensors: each row in
    ``orders[b]``, or (None) every row in the network's ``order``."""
    if orders is None:
        return net._to_decoding, net._to_env
    inverse = orders.argsort(-1)
    return (lambda x: permute_rows(x, orders)), (lambda x: permute_rows(x, inverse))


def masked_log_softmax(out: torch.Tensor, avail: torch.Tensor | None) -> torch.Tensor:
    """Log-probabilities of discrete logits, unavailable actions (``avail`` 0) at ``MASKED_LOGIT``."""
    if avail is not None:
        out = out.masked_fill(avail == 0, MASKED_LOGIT)
    return torch.log_softmax(out, -1)


def autoregressive(net: MultiAgentTransformer, obs: torch.Tensor, rep: torch.Tensor, avail: torch.Tensor | None,
                   deterministic: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """Actions ``(B, A, k)`` and their per-dimension log-probabilities, in decoding order, the first
    position first, each agent's action entering the next agent's token (MAT-Dec: one pass)."""
    batch, n = obs.shape[0], net.n_agents
    actions = obs.new_zeros(batch, n, net.width)
    log_probs = obs.new_zeros(batch, n, net.width)
    for i in range(1 if net.decentralised else n):
        out = net.decode(net.shifted(actions), rep, obs)
        chosen = slice(None) if net.decentralised else slice(i, i + 1)
        out = out[:, chosen]
        if net.discrete:
            logp = masked_log_softmax(out, None if avail is None else avail[:, chosen])
            a = logp.argmax(-1) if deterministic else torch.distributions.Categorical(logits=logp).sample()
            actions[:, chosen, 0] = a.float()
            log_probs[:, chosen, 0] = logp.gather(-1, a.unsqueeze(-1)).squeeze(-1)
        else:
            gauss = torch.distributions.Normal(out, net.std().expand_as(out))
            a = out if deterministic else gauss.sample()
            actions[:, chosen] = a
            log_probs[:, chosen] = gauss.log_prob(a)
    return actions, log_probs


def teacher_forced(net: MultiAgentTransformer, obs: torch.Tensor, actions: torch.Tensor, avail: torch.Tensor | None
                   ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(per-dimension log-probs ``(B, A, k)``, entropies ``(B, A, k)``, values ``(B, A)``) of given
    actions, every agent in one decoder pass, in decoding order."""
    values, rep = net.encode(obs)
    out = net.decode(net.shifted(actions), rep, obs)
    if net.discrete:
        logp = masked_log_softmax(out, avail)
        taken = logp.gather(-1, actions.long())
        entropy = -(logp.exp() * logp).sum(-1, keepdim=True)
        return taken, entropy, values
    gauss = torch.distributions.Normal(out, net.std().expand_as(out))
    return gauss.log_prob(actions), gauss.entropy(), values


def act(net: MultiAgentTransformer, obs: torch.Tensor, avail: torch.Tensor | None, deterministic: bool,
        orders: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """One step of every agent in ``B`` envs, agents in the env's order: (actions ``(B, A, k)``, their
    per-dimension log-probs, the encoder's values ``(B, A)``), from one encoder pass."""
    to_decoding, to_env = permutations(net, orders)
    x = to_decoding(obs)
    values, rep = net.encode(x)
    actions, log_probs = autoregressive(net, x, rep, None if avail is None else to_decoding(avail), deterministic)
    return to_env(actions), to_env(log_probs), to_env(values)


def evaluate(net: MultiAgentTransformer, obs: torch.Tensor, actions: torch.Tensor, avail: torch.Tensor | None,
             orders: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``teacher_forced`` with agents in the env's order (in and out)."""
    to_decoding, to_env = permutations(net, orders)
    log_probs, entropy, values = teacher_forced(net, to_decoding(obs), to_decoding(actions),
                                                None if avail is None else to_decoding(avail))
    return to_env(log_probs), to_env(entropy), to_env(values)
