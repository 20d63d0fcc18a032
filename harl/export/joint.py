"""A team that acts through one network (MAT, MAT-Dec) as one tensor function: the joint export.

``DeployJoint(policy, space, masked)`` wraps a ``MultiAgentTransformer``: its ``forward`` encodes
every agent's observation and decodes the agents one after another (greedy discrete actions,
the Gaussian's mean for a Box), all in tensors, so ``torch.jit.trace`` records the whole
auto-regressive loop (unrolled over the fixed number of agents)::

    inputs:  obs (B, A, obs_dim) float32 (each agent's observation zero-padded to the widest)
             [, avail (B, A, n) float32]
    outputs: actions: Discrete int64 (B, A); Box float32 (B, A, *shape), clipped into the Box

The manifest says ``"joint"`` (this module's file, inputs and outputs); ``harl.load_policy``
stacks the agents' observations, runs it once and hands back one action per agent.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from gymnasium import spaces
from torch import nn

from harl.nets.heads import avail_size
from harl.policy.mat import MASKED_LOGIT, MultiAgentTransformer


class DeployJoint(nn.Module):
    """``forward(obs [, avail])`` -> ``actions`` of every agent: a MAT team's deterministic acting."""

    low: torch.Tensor
    high: torch.Tensor

    def __init__(self, policy: MultiAgentTransformer, space: spaces.Space, masked: bool) -> None:
        super().__init__()
        self.policy = policy
        self.masked = masked and policy.discrete
        self.n_agents = policy.n_agents
        self.obs_dim = policy.obs_dim
        self.discrete = policy.discrete
        self.shape = tuple(space.shape) if isinstance(space, spaces.Box) else ()
        if isinstance(space, spaces.Box):
            self.register_buffer("low", torch.as_tensor(np.asarray(space.low, np.float32).ravel()))
            self.register_buffer("high", torch.as_tensor(np.asarray(space.high, np.float32).ravel()))

    def input_names(self) -> list[str]:
        return ["obs"] + (["avail"] if self.masked else [])

    def output_names(self) -> list[str]:
        return ["actions"]

    def forward(self, *inputs: torch.Tensor) -> torch.Tensor:
        policy = self.policy
        obs = policy._to_decoding(policy.identify(inputs[0]))
        avail = policy._to_decoding(inputs[1]) if self.masked else None
        _, rep = policy.encode(obs)
        actions = obs.new_zeros(obs.shape[0], self.n_agents, policy.width)
        for i in range(1 if policy.decentralised else self.n_agents):
            out = policy.decode(policy.shifted(actions), rep, obs)
            if not policy.decentralised:
                out = out[:, i:i + 1]
            if self.discrete:
                if avail is not None:
                    mask = avail if policy.decentralised else avail[:, i:i + 1]
                    out = out.masked_fill(mask == 0, MASKED_LOGIT)
                chosen = torch.log_softmax(out, -1).argmax(-1, keepdim=True).to(actions.dtype)
            else:
                chosen = out
            if policy.decentralised:
                actions = chosen
            else:
                actions = torch.cat([actions[:, :i], chosen, actions[:, i + 1:]], 1)
        actions = policy._to_env(actions)
        if self.discrete:
            return actions[..., 0].long()
        actions = torch.minimum(torch.maximum(actions, self.low), self.high)
        return actions.reshape(actions.shape[0], self.n_agents, *self.shape)


def joint_policy(policy: nn.Module) -> MultiAgentTransformer | None:
    """The team's one network when it acts through one (MAT, MAT-Dec); None for a team of per-agent actors."""
    return policy if isinstance(policy, MultiAgentTransformer) else None


def deploy_joint(policy: MultiAgentTransformer, space: spaces.Space, masked: bool) -> DeployJoint:
    return DeployJoint(policy, space, masked).cpu().eval()


def joint_example(module: DeployJoint, batch: int = 2) -> tuple[torch.Tensor, ...]:
    """Inputs of the right shapes for tracing (all actions available)."""
    inputs = [torch.zeros(batch, module.n_agents, module.obs_dim)]
    if module.masked:
        inputs.append(torch.ones(batch, module.n_agents, module.policy.action_dim))
    return tuple(inputs)


def joint_entry(file: str, module: DeployJoint, space: spaces.Space) -> dict[str, Any]:
    """The manifest's ``"joint"``: the one module every agent acts through."""
    n, a = module.n_agents, module.obs_dim
    inputs = [{"name": "obs", "shape": ["batch", n, a], "dtype": "float32"}]
    if module.masked:
        inputs.append({"name": "avail", "shape": ["batch", n, avail_size(space)], "dtype": "float32"})
    shape: list[Any] = ["batch", n, *module.shape]
    outputs = [{"name": "actions", "shape": shape, "dtype": "int64" if module.discrete else "float32"}]
    return {"file": file, "kind": "mat", "n_agents": n, "obs_dim": a, "inputs": inputs, "outputs": outputs}
