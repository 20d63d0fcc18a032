"""Sable's objective: PPO over the whole team, Sable's network (``harl.nets.sable``) its policy.

``[updater.objective] kind = "sable"`` builds the network as the pipeline's policy
(``harl.policy.sable_policy``) and trains it with one Adam over all its weights, as Mava's
(mava/systems/sable/anakin/rec_sable.py:200-252, ff_sable.py:186-236).  Per minibatch, with
``A`` the GAE advantages of each agent (its own reward and value, no bootstrap across an episode's
end, as Mava) standardised over the minibatch's every (step, agent)::

    A'          = (A - mean A) / (std A + 1e-8)                       # population std
    r_{n,i}     = exp(log pi(a_{n,i}) - log pi_old(a_{n,i}))          # each agent's action, one ratio
    policy_loss = - mean_{n,i} min(r A', clip(r, 1 - c, 1 + c) A')
    entropy     =   mean_{n,i} H_{n,i}
    loss = policy_loss - entropy_coef * entropy + value_loss_coef * value_loss

``value_loss`` is ``[critic] kind = "sable_v"``'s (``harl.update.sable_values``), and the ``joint``
updater (``harl.update.joint``) hands this learner the rollout.  Minibatches are Mava's: the
recurrent variant (``memory``, rec_sable) splits the envs, each minibatch holding whole rollouts
from the retention states they began with (rec_sable.py:300-336); the feed-forward one (ff_sable)
shuffles single steps (ff_sable.py:282-309).  Each epoch draws one permutation of the agents and
trains every row in that decoding order (rec_sable.py:314-316, ff_sable.py:292-296), while
collection decodes agent 0 first.

``agents_chunk_size`` trains retention over chunks of agents (memory linear in the agents, the same
function); ``timestep_positional_encoding`` adds the sinusoid of each step's count in its episode (the
counts ride the step record).  Defaults are Mava's configs/system/sable/{rec,ff}_sable.yaml and
configs/network/{rec,ff}_retention.yaml.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import attrs
import torch

from harl.nets.sable.network import SableHidden
from harl.policy.sable_policy import FIELDS, STEP_FIELD, SablePolicy, record_fields, sable_policy
from harl.registry import register
from harl.settings import in_range, kind_field, one_of, positive, setting
from harl.update.common import optimizer_step
from harl.update.objectives.mat import TeamStats


@attrs.frozen
class SableConfig:
    """``[updater.objective] kind = "sable"``: Sable (Mahjoub et al. 2025), Mava's rec_sable or ff_sable."""

    kind: str = kind_field("sable")
    memory: bool = setting(True, "carry the retention states across timesteps and rollouts, reset where an "
                           "episode begins (Mava's rec_sable); false: every step alone (ff_sable)")
    n_block: int = setting(1, "encoder (and decoder) blocks", positive())
    embed_dim: int = setting(64, "width of every agent's token", positive())
    n_head: int = setting(1, "retention heads (a divisor of embed_dim)", positive())
    decay_scaling_factor: float = setting(0.8, "scales each head's decay kappa", in_range(0, 1))
    chunk_timesteps: int = setting(0, "train over chunks of this many timesteps, the state carried between "
                                   "them (Mava's timestep_chunk_size with use_chunkwise); 0: the whole rollout "
                                   "in one parallel pass (a divisor of collector.rollout_length)", in_range(0, None))
    agents_chunk_size: int = setting(0, "train retention over chunks of this many agents of a step, the state "
                                     "carried from chunk to chunk, so memory grows linearly in the agents (Mava's "
                                     "ff_config agents_chunk_size with use_chunkwise; for the recurrent variant "
                                     "harl's own, one timestep after another); the same function as unchunked; "
                                     "0: all agents in one pass (a divisor of the agent count)", in_range(0, None))
    agents_chunk_encoder: str = setting("whole", "how the chunked encoder reads a step's agents: whole (every agent "
                                        "reads every agent, the unchunked function) or causal (Mava 73c4611's "
                                        "train_encoder_chunkwise / execute_encoder_chunkwise: an agent reads its own "
                                        "chunk and those before it)", one_of(("whole", "causal")))
    timestep_positional_encoding: bool = setting(False, "recurrent Sable: add a sinusoid of each step's count in "
                                                 "its episode to retention's key, query and value (Mava's "
                                                 "rec_config timestep_positional_encoding, off by default)")
    agent_id: bool = setting(True, "append each agent's one-hot id to its observation (Mava's add_agent_id)")
    clip: float = setting(0.2, "clip range of each agent's probability ratio (Mava's clip_eps)",
                          in_range(0, 1, low_open=True))
    epochs: int = setting(4, "passes over the rollout per iteration (Mava's ppo_epochs)", positive())
    minibatches: int = setting(2, "minibatches per pass: of envs (memory), of env steps (feed-forward)",
                               positive())
    entropy_coef: float = setting(0.01, "weight of the entropy bonus (Mava's ent_coef)", in_range(0, None))
    lr: float = setting(2.5e-4, "Adam learning rate of the whole network (Mava's actor_lr)", positive())
    adam_eps: float = setting(1e-5, "Adam epsilon", positive())
    max_grad_norm: float = setting(0.5, "gradient-norm clip over the whole network; 0 disables", in_range(0, None))

    def record_fields(self, n_agents: int) -> dict[str, tuple[tuple[int, ...], torch.dtype, float]]:
        """The step-record fields its policy will declare (``harl.sizes.planned_record_bytes`` counts them
        before anything is built); the agent count does not change them."""
        return record_fields(self.memory, self.n_head, self.n_block, self.embed_dim,
                             self.timestep_positional_encoding)


@attrs.frozen
class SableBatch:
    """A rollout as Sable's update reads it, env-major: ``E`` envs x ``T`` steps x ``A`` agents."""

    obs: torch.Tensor
    """``(E, T, A, d)`` stacked observations (with the agents' ids where ``agent_id``)."""
    actions: torch.Tensor
    """``(E, T, A)`` category indices, or ``(E, T, A, k)`` Box values."""
    old_log_probs: torch.Tensor
    """``(E, T, A)`` each agent's log-probability at collection."""
    legal: torch.Tensor | None
    """``(E, T, A, n)`` available-action masks, or None."""
    starts: torch.Tensor
    """``(E, T)`` True where a step begins an episode (Mava's dones)."""
    advantages: torch.Tensor
    """``(E, T, A)`` raw GAE advantages (standardised per minibatch)."""
    old_values: torch.Tensor
    """``(E, T, A)`` values at collection."""
    returns: torch.Tensor
    """``(E, T, A)`` value targets."""
    hidden: SableHidden | None
    """The recurrent variant's states before each env's first step; None: start from zero."""
    step_count: torch.Tensor | None = None
    """``(E, T, A)`` each step's count in its episode (the timestep encoding's input); None: no encoding."""

    def rows(self, envs: torch.Tensor, agents: torch.Tensor) -> SableBatch:
        """The rollouts of ``envs``, their agents in the order ``agents``."""
        def pick(x: torch.Tensor) -> torch.Tensor:
            return x[envs][:, :, agents]

        return SableBatch(pick(self.obs), pick(self.actions), pick(self.old_log_probs),
                          None if self.legal is None else pick(self.legal), self.starts[envs], pick(self.advantages),
                          pick(self.old_values), pick(self.returns),
                          None if self.hidden is None else SableHidden(*(h[envs] for h in self.hidden)),
                          None if self.step_count is None else pick(self.step_count))

    def single_steps(self) -> SableBatch:
        """Every (env, step) as a rollout of one step from zero states (the feed-forward variant)."""
        def flat(x: torch.Tensor) -> torch.Tensor:
            return x.reshape(-1, 1, *x.shape[2:])

        n = self.obs.shape[0] * self.obs.shape[1]
        return SableBatch(flat(self.obs), flat(self.actions), flat(self.old_log_probs),
                          None if self.legal is None else flat(self.legal),
                          torch.ones(n, 1, dtype=torch.bool, device=self.obs.device), flat(self.advantages),
                          flat(self.old_values), flat(self.returns), None)


def standardize(advantages: torch.Tensor) -> torch.Tensor:
    """Mava's ``(gae - gae.mean()) / (gae.std() + 1e-8)`` over every entry (jnp.std: the population std)."""
    return (advantages - advantages.mean()) / (advantages.std(correction=0) + 1e-8)


def sable_policy_loss(log_probs: torch.Tensor, old_log_probs: torch.Tensor, advantages: torch.Tensor,
                      clip: float) -> tuple[torch.Tensor, torch.Tensor]:
    """(policy loss, ratios): the clipped surrogate of each (step, agent), averaged over all of them,
    ``advantages`` already standardised."""
    ratio = (log_probs - old_log_probs).exp()
    surrogate = torch.min(ratio * advantages, ratio.clamp(1 - clip, 1 + clip) * advantages)
    return -surrogate.mean(), ratio


def sable_batch(buffer: Any, policy: SablePolicy) -> SableBatch:
    """The rollout in ``buffer`` (a rollout buffer with one value per agent) as a ``SableBatch``;
    reads the buffer, writes nothing."""
    def team(per_agent: list[torch.Tensor]) -> torch.Tensor:
        """Per agent ``(T, E, ...)`` -> ``(E, T, A, ...)``."""
        return torch.stack(per_agent, 2).transpose(0, 1)

    actions = team(buffer.actions)
    actions = actions.squeeze(-1).long() if policy.discrete else actions
    masks = [buffer.avail[i] for i in range(buffer.n_agents)]
    legal = None if not policy.discrete or any(m is None for m in masks) else team([m[:-1] for m in masks])
    hidden = None
    if policy.memory:
        hidden = SableHidden(*(buffer.extras[name][0] for name in FIELDS))
    steps = None
    if policy.positional_encoding:  # slot t + 1 holds step t's count
        steps = buffer.extras[STEP_FIELD][1:].T[..., None].expand(-1, -1, policy.n_agents)
    return SableBatch(
        obs=policy.stack_obs([o[:-1] for o in buffer.obs]).transpose(0, 1), actions=actions,
        old_log_probs=team(buffer.log_probs).sum(-1), legal=legal, starts=buffer.starts[:-1].T.bool(),
        advantages=buffer.advantages.transpose(0, 1), old_values=buffer.values[:-1].transpose(0, 1),
        returns=buffer.returns.transpose(0, 1), hidden=hidden, step_count=steps)


class SableLearner:
    """Adam steps on Sable's joint loss over epochs x minibatches, each epoch in a fresh agent order."""

    def __init__(self, policy: SablePolicy, config: SableConfig, generator: torch.Generator) -> None:
        self.policy = policy
        self.config = config
        self.generator = generator
        self.optimizer = torch.optim.Adam(policy.parameters(), lr=config.lr, eps=config.adam_eps)
        self.base_lr = config.lr

    def team_batch(self, buffer: Any, critic_learner: Any) -> SableBatch:
        """What the ``joint`` updater hands ``update``: the rollout, read once (the collection-time values
        in the critic's units: ``sable_v``'s ``value_norm``)."""
        batch = sable_batch(buffer, self.policy)
        return attrs.evolve(batch, old_values=critic_learner.old_values(batch.old_values))

    def loss(self, mb: SableBatch, value_loss: Any, value_loss_coef: float) -> tuple[torch.Tensor, ...]:
        """(loss, policy loss, value loss, entropy, mean ratio) of one minibatch."""
        hidden = mb.hidden if mb.hidden is not None else self.policy.zero_hidden(mb.obs.shape[0])
        out = self.policy.evaluate(mb.obs, mb.actions, hidden, mb.starts, mb.legal, mb.step_count)
        policy_loss, ratio = sable_policy_loss(out.log_probs, mb.old_log_probs, standardize(mb.advantages),
                                               self.config.clip)
        entropy = out.entropy.mean()
        v_loss = value_loss(out.values, mb)
        loss = policy_loss - self.config.entropy_coef * entropy + value_loss_coef * v_loss
        return loss, policy_loss, v_loss, entropy, ratio.mean()

    def minibatches(self, batch: SableBatch) -> list[SableBatch]:
        """One epoch's minibatches: a permutation of the rollouts (memory) or of the single steps, then one
        of the agents for all of them (Mava draws them in this order)."""
        cfg = self.config
        units = batch if cfg.memory else batch.single_steps()
        count = units.obs.shape[0]
        perm = torch.randperm(count, generator=self.generator).to(batch.obs.device)
        agents = torch.randperm(self.policy.n_agents, generator=self.generator).to(batch.obs.device)
        size = count // cfg.minibatches
        return [units.rows(perm[k * size:(k + 1) * size], agents) for k in range(cfg.minibatches)]

    def update(self, batch: SableBatch, value_loss: Any, value_loss_coef: float = 0.5) -> TeamStats:
        """``epochs`` passes over ``batch`` (see ``minibatches``)."""
        cfg = self.config
        rows = []
        for _ in range(cfg.epochs):
            for mb in self.minibatches(batch):
                loss, *terms = self.loss(mb, value_loss, value_loss_coef)
                norm = optimizer_step(self.optimizer, loss, self.policy.parameters(), cfg.max_grad_norm,
                                      report_norm=True)
                assert norm is not None
                rows.append(torch.stack([*(t.detach() for t in terms), norm.detach()]))
        policy_loss, v_loss, entropy, ratio, norm = torch.stack(rows).mean(0).tolist()
        return TeamStats(policy_loss, v_loss, entropy, ratio, norm)


    @torch.no_grad()
    def ratio(self, batch: SableBatch) -> torch.Tensor:
        """``(E, T, A)`` each agent's new/old probability ratio, agents in collection's order."""
        units = batch if self.config.memory else batch.single_steps()
        hidden = units.hidden if units.hidden is not None else self.policy.zero_hidden(units.obs.shape[0])
        out = self.policy.evaluate(units.obs, units.actions, hidden, units.starts, units.legal, units.step_count)
        return (out.log_probs - units.old_log_probs).exp().reshape(batch.old_log_probs.shape)


def _check(config: SableConfig, built: Mapping[str, Any]) -> Iterable[tuple[list[str], str]]:
    """Settings each valid alone that Sable cannot train with together."""
    if config.embed_dim % config.n_head:
        yield (["updater", "objective", "n_head"],
               f"expected a divisor of embed_dim ({config.embed_dim}), got {config.n_head}: each retention head "
               "takes an equal share of the width")
    collector = built.get("collector")
    length, n_envs = getattr(collector, "rollout_length", None), getattr(collector, "n_envs", None)
    if config.chunk_timesteps and not config.memory:
        yield (["updater", "objective", "chunk_timesteps"],
               f"{config.chunk_timesteps}: the feed-forward Sable (memory = false) trains single steps, which have "
               "no timesteps to chunk; set it to 0")
    elif config.chunk_timesteps and length is not None and length % config.chunk_timesteps:
        yield (["updater", "objective", "chunk_timesteps"],
               f"expected a divisor of collector.rollout_length ({length}), got {config.chunk_timesteps}: the "
               "rollout is trained in whole chunks")
    if config.agents_chunk_size and config.chunk_timesteps:
        yield (["updater", "objective", "agents_chunk_size"],
               f"{config.agents_chunk_size} with chunk_timesteps = {config.chunk_timesteps}: agent chunks already "
               "train one timestep after another; set one of the two to 0")
    if config.agents_chunk_encoder != "whole" and not config.agents_chunk_size:
        yield (["updater", "objective", "agents_chunk_encoder"],
               f'"{config.agents_chunk_encoder}" says how an encoder in chunks of agents reads them, but '
               "agents_chunk_size = 0 trains no chunks: set agents_chunk_size, or remove the key")
    if config.timestep_positional_encoding and not config.memory:
        yield (["updater", "objective", "timestep_positional_encoding"],
               "true: the timestep encoding is the recurrent Sable's (memory = true; Mava encodes rec_sable only, "
               "mava/utils/sable_utils.py:108-111); the feed-forward one sees single steps: set it to false")
    units = n_envs if config.memory else (None if n_envs is None or length is None else n_envs * length)
    what = "collector.n_envs" if config.memory else "collector.n_envs x collector.rollout_length"
    if units is not None and units % config.minibatches:
        yield (["updater", "objective", "minibatches"],
               f"expected a divisor of {what} ({units}), got {config.minibatches}: Mava splits the "
               f"{'envs' if config.memory else 'env steps'} into equal minibatches")
    policy = built.get("policy")
    if policy is not None and getattr(policy, "recurrent", "none") != "none":
        yield (["policy", "recurrent"], f'"{policy.recurrent}": Sable is its own policy and carries its own '
               'retention states ([updater.objective] sets its size); remove the key or set recurrent = "none"')
    if collector is not None and getattr(collector, "compile", "off") != "off":
        yield (["collector", "compile"], f'"{collector.compile}": Sable\'s collection step is not compiled; '
               'set compile = "off"')


register("updater.objective", SableConfig, family="on_policy", check=_check,
         provides=("joint_loss", "sable_policy"), requires={"critic": "sable_values", "updater": "joint_update"},
         factory=lambda config, parts, agent: SableLearner(parts.policy, config, parts.generator),
         policy=sable_policy)
