"""A Sable team (``harl.policy.sable_policy``) as one tensor function: the joint export, as MAT's.

``DeploySable(policy, space, masked)``: ``forward`` stacks nothing and samples nothing: it takes the
agents' observations already stacked, appends the agents' ids where the policy does, encodes every agent
and decodes them one after another (greedy discrete actions, the Gaussian's mean clipped into the Box),
all in tensors, so ``torch.jit.trace`` records the whole loop (unrolled over the fixed agent count)::

    inputs:  obs (B, A, obs_dim) float32 (each agent's observation zero-padded to the widest)
             [, avail (B, A, n) float32]
             recurrent Sable only: starts (B,) float32 (1 where a row begins an episode),
                 encoder, decoder_self, decoder_cross (B, n_head, n_block, hs, hs) float32 (the states
                 after the previous step) [, steps (B,) int64 (the previous step's count: the timestep
                 encoding)]
    outputs: actions: Discrete int64 (B, A); Box float32 (B, A, k)
             recurrent Sable only: the three states after this step [, steps (B,) int64]

The manifest says ``"joint"`` with ``kind = "sable"`` and ``state``: the names of the carried inputs,
each output again after the actions, which ``harl.load_policy`` carries from call to call.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from gymnasium import spaces
from torch import nn

from harl.nets.heads import avail_size
from harl.nets.sable.network import SableHidden, SableNetwork
from harl.nets.sable.retention import network_hidden_shape
from harl.policy.sable_policy import SablePolicy

STATES = SableHidden._fields
"""The carried states' input and output names, in order."""


class DeploySable(nn.Module):
    """``forward(obs [, avail] [, starts, encoder, decoder_self, decoder_cross [, steps]])`` -> actions
    [, the states after the step]: a Sable team's deterministic acting."""

    low: torch.Tensor
    high: torch.Tensor
    ids: torch.Tensor

    def __init__(self, policy: SablePolicy, space: spaces.Space, masked: bool) -> None:
        super().__init__()
        self.policy = policy
        self.masked = masked and policy.discrete
        self.memory = policy.memory
        self.encoded = policy.positional_encoding
        self.n_agents, self.obs_dim, self.discrete = policy.n_agents, policy.obs_width, policy.discrete
        self.register_buffer("ids", torch.eye(policy.n_agents) if policy.agent_id else torch.zeros(policy.n_agents, 0))
        self.shape = tuple(space.shape) if isinstance(space, spaces.Box) else ()
        if isinstance(space, spaces.Box):
            self.register_buffer("low", torch.as_tensor(np.asarray(space.low, np.float32).ravel()))
            self.register_buffer("high", torch.as_tensor(np.asarray(space.high, np.float32).ravel()))

    def state_names(self) -> list[str]:
        """The carried inputs after ``starts``: the three states, and the step count with the encoding."""
        if not self.memory:
            return []
        return [*STATES, *(["steps"] if self.encoded else [])]

    def input_names(self) -> list[str]:
        return ["obs", *(["avail"] if self.masked else []), *(["starts"] if self.memory else []),
                *self.state_names()]

    def output_names(self) -> list[str]:
        return ["actions", *self.state_names()]

    def forward(self, *inputs: torch.Tensor) -> Any:
        policy = self.policy
        obs = inputs[0]
        at = 1
        avail = None
        if self.masked:
            avail, at = inputs[1], 2
        batch = obs.shape[0]
        x = torch.cat([obs, self.ids.expand(batch, -1, -1)], -1)
        if self.memory:
            starts = inputs[at].bool()
            hidden = SableHidden(*inputs[at + 1:at + 4])
            steps = None
            if self.encoded:
                steps = torch.where(starts, torch.zeros_like(inputs[at + 4]), inputs[at + 4] + 1)
        else:
            starts = obs.new_ones(batch).bool()
            zero = obs.new_zeros(network_hidden_shape(batch, policy.n_head, policy.n_block, policy.embed_dim))
            hidden, steps = SableHidden(zero, zero, zero), None
        out = SableNetwork.act(policy, x, hidden, starts, avail, True, step_count=policy.per_agent(steps))
        actions = out.actions
        if not self.discrete:
            actions = torch.minimum(torch.maximum(actions, self.low), self.high)
            actions = actions.reshape(batch, self.n_agents, *self.shape)
        if not self.memory:
            return actions
        return (actions, *out.hidden, *([] if steps is None else [steps]))


def deploy_sable(policy: SablePolicy, space: spaces.Space, masked: bool) -> DeploySable:
    return DeploySable(policy, space, masked).cpu().eval()


def sable_example(module: DeploySable, batch: int = 2) -> tuple[torch.Tensor, ...]:
    """Inputs of the right shapes for tracing (all actions available, zero states, mixed starts)."""
    policy = module.policy
    inputs = [torch.zeros(batch, module.n_agents, module.obs_dim)]
    if module.masked:
        inputs.append(torch.ones(batch, module.n_agents, policy.action_dim))
    if module.memory:
        inputs.append((torch.arange(batch) % 2 == 0).float())
        inputs += [torch.zeros(network_hidden_shape(batch, policy.n_head, policy.n_block, policy.embed_dim))
                   for _ in STATES]
        if module.encoded:
            inputs.append(torch.zeros(batch, dtype=torch.long))
    return tuple(inputs)


def sable_entry(file: str, module: DeploySable, space: spaces.Space) -> dict[str, Any]:
    """The manifest's ``"joint"`` of a Sable team: its inputs, outputs and carried states."""
    policy = module.policy
    n, a = module.n_agents, module.obs_dim
    inputs: list[dict[str, Any]] = [{"name": "obs", "shape": ["batch", n, a], "dtype": "float32"}]
    if module.masked:
        inputs.append({"name": "avail", "shape": ["batch", n, avail_size(space)], "dtype": "float32"})
    state: list[dict[str, Any]] = []
    if module.memory:
        inputs.append({"name": "starts", "shape": ["batch"], "dtype": "float32"})
        shape = ["batch", *network_hidden_shape(1, policy.n_head, policy.n_block, policy.embed_dim)[1:]]
        state = [{"name": name, "shape": shape, "dtype": "float32"} for name in STATES]
        if module.encoded:
            state.append({"name": "steps", "shape": ["batch"], "dtype": "int64"})
    outputs = [{"name": "actions", "shape": ["batch", n, *module.shape],
                "dtype": "int64" if module.discrete else "float32"}, *state]
    return {"file": file, "kind": "sable", "n_agents": n, "obs_dim": a, "inputs": inputs + state,
            "outputs": outputs, "state": [s["name"] for s in state]}
