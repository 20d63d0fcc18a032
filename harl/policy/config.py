"""``[policy]``: the config of the networks that act, one class per family kind of network.

``PolicyConfig`` is the actor-critic families' (on-policy and off-policy actors);
``AgentQPolicyConfig`` is the value family's agent Q networks (IQL, VDN, QMIX).  A family names
its class in its ``Family.policy_config`` (``harl.config.loading.Loader`` structures ``[policy]``
as the pipeline's family says).  The keys mean the same in both: ``hidden_sizes`` the widths,
``recurrent`` the GRU, ``share_parameters`` one network for all agents, ``agent_id`` the
agent's one-hot id as an input.
"""

from __future__ import annotations

from typing import Any

import attrs

from harl.nets.image import CHANNEL_ORDERS, ENCODERS
from harl.nets.mlp import ACTIVATIONS, INITS
from harl.settings import InvalidSetting, each_positive, in_range, one_of, positive, setting


@attrs.frozen
class PolicyConfig:
    """``[policy]`` of the actor-critic families: the actors' networks (and the V critic's GRU)."""

    hidden_sizes: tuple[int, ...] = setting((128, 128), "widths of the hidden layers", each_positive())
    activation: str = setting("relu", "hidden activation", one_of(ACTIVATIONS))
    input_norm: bool = setting(True, "LayerNorm on the raw observation (HARL's feature normalisation)")
    std_x_coef: float = setting(1.0, "Gaussian std = sigmoid(p / std_x_coef) * std_y_coef; p starts at std_x_coef", positive())
    std_y_coef: float = setting(0.5, "upper bound of the Gaussian std", positive())
    output_gain: float = setting(0.01, "orthogonal-init gain of the action layer (small: near-uniform start)", in_range(0, None, low_open=True))
    share_parameters: bool = setting(False, "one actor for all agents (needs identical spaces; an independent "
                                     "critic's own sharing: [critic] share_parameters)")
    recurrent: str = setting("none", "a GRU after the MLP of each actor and of the V critic: none; naive (trained on whole rollouts); chunked (on chunk_length pieces)", one_of(("none", "naive", "chunked")))
    chunk_length: int = setting(10, "steps per training sequence when recurrent = chunked (HARL's data_chunk_length)", positive())
    layer_norm: bool = setting(True, "LayerNorm after each hidden layer of the MLP and after the GRU (HARL's); false: "
                               "plain Linear -> activation and a bare GRU (EPyMARL's rnn agent)")
    init: str = setting("orthogonal", "initial weights: orthogonal (HARL's: gain per activation, the action layer at "
                        "output_gain) or torch (PyTorch's default initialisation of every layer, EPyMARL's)",
                        one_of(INITS))
    agent_id: bool = setting(False, "one actor shared by the agents (share_parameters = true): the agent's one-hot id "
                             "appended to its observation (EPyMARL's obs_agent_id; the critic's: [critic] agent_id)")
    encoder: str = setting("auto", "what reads an observation: cnn (HARL's CNN base), mlp, entity (attention over the units of an env that splits its observations into entities, e.g. SMAX; docs/entity-encoders.md), or auto (cnn for 3-D Box images, else mlp)", one_of(ENCODERS))
    channel_order: str = setting("auto", "image channel axis: last (HWC), first (CHW), or auto (the end of size 1, 3 or 4, last if both; else the smaller end)", one_of(CHANNEL_ORDERS))
    batch_agents: bool = setting(
        False, "agents as a batch dimension: actors of the same shapes act, evaluate and (MA simultaneous update) "
        "learn in one batched call, each with its own parameters and optimiser; a shared actor acts once for all "
        "agents. Off-policy (DDPG/TD3/SAC actors): acting, the critic target's next actions, the MA actor step and "
        "the target actors' polyak step; HA's actor round stays sequential. Equal to the per-agent loop to float "
        "rounding, its noise drawn in another order (docs/performance.md)")


def _one_width(_: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if len(value) != 1 or value[0] <= 0:
        raise InvalidSetting(
            attribute.name, f"expected one positive width, got {list(value)}: an agent Q network has one hidden "
            "width (Linear(inputs, H), ReLU, a GRU cell or Linear(H, H), Linear(H, actions)); write e.g. [64]")


@attrs.frozen
class AgentQPolicyConfig:
    """``[policy]`` of the value family (IQL, VDN, QMIX): the agents' Q networks (EPyMARL's ``rnn`` agent)."""

    hidden_sizes: tuple[int, ...] = setting(
        (64,), "the one hidden width H of each agent network, as a one-entry list (EPyMARL's hidden_dim: 64; its "
        "IQL 128)", _one_width)
    recurrent: str = setting(
        "none", "none: Linear(H, H) + ReLU after the first layer (EPyMARL's use_rnn false, its QMIX and VDN); "
        "naive: a GRU cell there, trained on whole sampled episodes (use_rnn true, its IQL)", one_of(("none", "naive")))
    share_parameters: bool = setting(True, "one network for all agents, told apart by agent_id (EPyMARL's basic "
                                     "controller); false: one per agent")
    agent_id: bool = setting(True, "each agent's one-hot id is an input (EPyMARL's obs_agent_id)")
    last_action: bool = setting(False, "each agent's previous action (one-hot, zeros at an episode's first step) is "
                                "an input (EPyMARL's obs_last_action)")
