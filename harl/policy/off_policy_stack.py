"""Off-policy actors of the same shapes, evaluated as one batched network (``[policy] batch_agents``).

The deterministic (DDPG, TD3), squashed-Gaussian and categorical (SAC) actors each say how
their network runs: ``stack_trunk`` names its ``Sequential`` of ``Linear``, ``LayerNorm`` and
activations, ``stack_heads`` the ``Linear`` layers on the trunk's output, and ``outputs`` says
what the heads' outputs mean.  Their action maths (``act_from``, ``explore_from``, ``sample``)
takes any leading axes.  A stack runs trunk and heads with the agents' parameters stacked
(``harl.nets.stacked``: one ``baddbmm`` per layer) and hands the result, agent axis first, to
the first actor's own methods, so the maths is written once and the loop and the stack share
it.  Actors stack when their networks have the same shapes and their maths the same
constants (bounds, exploration noise, category sizes): ``off_policy_signature``.  An actor with
an image encoder, or D3QN's dueling Q, does not stack.

Each call agrees with every actor's own to float rounding (``tests/policy/test_off_policy_stack.py``);
noise is drawn as one block for the group, so the random numbers reach the agents in another
order than the per-agent loop's.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch import nn

from harl.nets.plain import EdgeLinear
from harl.nets.stacked import Params, ParamStack, finish, group_agents, layers_signature, linear, run_layers


def _part(module: nn.Module, path: str) -> Any:
    """``module``'s attribute at the dotted ``path`` (None where there is none)."""
    found: Any = module
    for name in path.split("."):
        found = getattr(found, name, None)
    return found


def off_policy_signature(actor: nn.Module) -> tuple[Any, ...] | None:
    """What two off-policy actors must share to be stacked (None: ``actor`` cannot be): the class,
    the trunk's and heads' shapes, the buffers' values (the Box's centre and range), the
    exploration noise and category sizes, dtype and device."""
    path = getattr(type(actor), "stack_trunk", None)
    if path is None:
        return None
    layers = layers_signature(_part(actor, path))
    if layers is None:
        return None
    heads = []
    for name in type(actor).stack_heads:  # type: ignore[attr-defined]
        head = getattr(actor, name, None)
        if not isinstance(head, nn.Linear):
            return None
        heads.append((name, tuple(head.weight.shape), isinstance(head, EdgeLinear)))
    constants = tuple((name, tuple(b.flatten().tolist())) for name, b in actor.named_buffers())
    first = next(actor.parameters())
    return (type(actor).__name__, layers, tuple(heads), constants, getattr(actor, "expl_noise", None),
            tuple(getattr(actor, "sizes", ())), first.dtype, str(first.device))


def group_off_policy(actors: Sequence[nn.Module | None]) -> list[list[int]]:
    """The agents in groups that stack (``harl.nets.stacked.group_agents`` by ``off_policy_signature``)."""
    return group_agents(actors, off_policy_signature)


class OffPolicyStack(ParamStack):
    """The off-policy actors of ``actors`` (one signature) as one network over a leading agent axis.

    Observations ``(A, N, d)``; outputs as each actor's, with the agent axis first."""

    def __init__(self, actors: Sequence[nn.Module]) -> None:
        sigs = {off_policy_signature(a) for a in actors}
        if None in sigs or len(sigs) != 1:
            raise ValueError("OffPolicyStack: the actors differ in shape or do not stack (see off_policy_signature)")
        super().__init__(actors)
        path = self.template.stack_trunk
        self.trunk = _part(self.template, path)
        self.prefix = path + "."
        self.heads = [(name, isinstance(getattr(self.template, name), EdgeLinear)) for name in self.template.stack_heads]

    def outputs(self, params: Params, obs: torch.Tensor, avail: torch.Tensor | None = None) -> Any:
        """Each actor's ``outputs`` of ``obs``: actions (DDPG/TD3), ``distribution``'s (mu, log_std)
        or log-probabilities (SAC); ``params`` from ``params()``, or ``params(grad=True)`` to learn."""
        x, affine = run_layers(params, self.trunk, self.prefix, obs)
        if not self.heads:
            return self.template.outputs(finish(x, affine), avail=avail)
        return self.template.outputs(*(linear(params, name, x, affine, edge) for name, edge in self.heads),
                                     avail=avail)

    def act(self, obs: torch.Tensor, avail: torch.Tensor | None, deterministic: bool) -> torch.Tensor:
        """Each actor's ``act``: ``(A, N, k)``."""
        return self.template.act_from(self.outputs(self.params(), obs, avail), deterministic)

    def explore(self, obs: torch.Tensor, avail: torch.Tensor | None, env_steps: int | None) -> torch.Tensor:
        """Each actor's ``explore``: ``(A, N, k)``."""
        return self.template.explore_from(self.outputs(self.params(), obs, avail), env_steps)
