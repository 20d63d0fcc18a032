"""PQN's update: epochs of minibatch Q regression on the rollout just collected, no target network.

::

    updater = PQNUpdater(config, learner, buffer_rows, generator)
    result = updater.update(buffer, progress)     # epochs x minibatches gradient steps

The loss is JaxMARL's, ``mean((Q_tot(s, a) - G)^2)`` (a full, not a half, mean square:
``pqn_vdn_ff.py:357``), with ``Q_tot`` the ``[critic]`` mixer of the agents' chosen Qs: ``vdn`` their
sum against the team's return (PQN-VDN), ``none`` each agent's own Q against it (PQN-IQL, the mean
over agents too).  Gradients are clipped to ``max_grad_norm`` globally, then RAdam
(``optax.chain(clip_by_global_norm, radam)``, ``pqn_vdn_ff.py:183-186``), its learning rate
optionally falling linearly to 1e-10 over every gradient step of the run (LR_LINEAR_DECAY,
``:173-181``).

Feed-forward (``pqn_vdn_ff.py:322-404``): each epoch shuffles the rollout's ``T x E`` steps (all
agents of a step together) into ``minibatches`` and regresses on the targets the returns stage made
from the acting network's Qs.  Recurrent (``pqn_vdn_rnn.py:327-461``): each epoch shuffles the envs
into ``minibatches`` of whole sequences (the memory window and the rollout), unrolls the GRU from the
state stored at the sequence's first step, makes the lambda-returns from that pass's own Qs with
gradients stopped, and regresses every step but the last (which only bootstraps).
"""

from __future__ import annotations

from typing import Any

import attrs
import torch

from harl.buffers.pqn import PQNBuffer
from harl.policy.pqn import PQNPolicy, masked
from harl.registry import register
from harl.settings import in_range, kind_field, one_of, positive, setting

LR_FLOOR = 1e-10
"""Where JaxMARL's linear learning-rate decay ends (``optax.linear_schedule(LR, 1e-10, ...)``)."""


@attrs.frozen
class PQNObjectiveConfig:
    """``[updater.objective] kind = "pqn_q"``: the Q regression's optimiser."""

    kind: str = kind_field("pqn_q")
    lr: float = setting(5e-4, "learning rate (JaxMARL's LR: MPE 5e-4, SMAX 2.5e-4)", in_range(0, None, low_open=True))
    lr_linear_decay: bool = setting(False, "the learning rate falls linearly to 1e-10 over the run's gradient "
                                    "steps (LR_LINEAR_DECAY: MPE false, SMAX true)")
    max_grad_norm: float = setting(1.0, "global gradient-norm clip (MAX_GRAD_NORM)", in_range(0, None, low_open=True))
    optimizer: str = setting("radam", "radam (JaxMARL's optax.radam) or adam", one_of(("radam", "adam")))


@attrs.frozen
class PQNUpdaterConfig:
    """``[updater] kind = "pqn"``: epochs of minibatch regression on each rollout."""

    kind: str = kind_field("pqn")
    epochs: int = setting(4, "passes over each rollout (NUM_EPOCHS)", positive())
    minibatches: int = setting(16, "minibatches per epoch (NUM_MINIBATCHES): of the rollout's T x E steps "
                               "(feed-forward), of its E envs' sequences (recurrent)", positive())
    objective: Any = setting(factory=PQNObjectiveConfig, doc="the regression's optimiser ([updater.objective])")


def lr_at(step: int, lr: float, total_steps: int) -> float:
    """``optax.linear_schedule(lr, 1e-10, total_steps)(step)``."""
    if total_steps <= 0:
        return lr
    frac = min(max(step, 0), total_steps) / total_steps
    return lr + frac * (LR_FLOOR - lr)


def regression_loss(chosen: torch.Tensor, targets: torch.Tensor, mixer: Any) -> torch.Tensor:
    """``chosen`` (..., A) the agents' Qs of their actions, ``targets`` (..., M) -> ``mean((mix - G)^2)``."""
    return (mixer(chosen, None) - targets).pow(2).mean()


@attrs.frozen
class PQNResult:
    loss: float
    q_taken_mean: float
    lr: float
    grad_steps: int

    def row(self) -> dict[str, Any]:
        return {"loss": self.loss, "q_taken_mean": self.q_taken_mean, "lr": self.lr, "grad_steps": self.grad_steps}


class PQNLearner:
    """The shared network's optimiser and one gradient step (the ``pqn_q`` objective)."""

    def __init__(self, config: PQNObjectiveConfig, policy: PQNPolicy, mixer: Any, returns: Any,
                 total_steps: int) -> None:
        self.config = config
        self.policy = policy
        self.mixer = mixer
        self.returns = returns
        self.total_steps = total_steps if config.lr_linear_decay else 0
        params = list(policy.parameters())
        cls = torch.optim.RAdam if config.optimizer == "radam" else torch.optim.Adam
        self.optimizer = cls(params, lr=config.lr, eps=1e-8)
        self.base_lr = config.lr
        self.grad_steps = 0

    def update(self, loss: torch.Tensor) -> float:
        """One gradient step on ``loss`` (clip, then the optimiser at this step's rate); the rate used."""
        lr = lr_at(self.grad_steps, self.config.lr, self.total_steps)
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.policy.parameters(), self.config.max_grad_norm)
        self.optimizer.step()
        self.grad_steps += 1
        return lr


class PQNUpdater:
    """See the module docstring."""

    def __init__(self, config: PQNUpdaterConfig, learner: PQNLearner, generator: torch.Generator) -> None:
        self.config = config
        self.learner = learner
        self.generator = generator

    def update(self, buffer: PQNBuffer, progress: float) -> PQNResult:
        net = self.learner.policy.net
        net.train()
        if buffer.hidden is None:
            losses, qs, lr = self._feed_forward(buffer)
        else:
            losses, qs, lr = self._recurrent(buffer)
        return PQNResult(float(torch.stack(losses).mean()), float(torch.stack(qs).mean()), lr,
                         self.learner.grad_steps)

    def _feed_forward(self, buffer: PQNBuffer) -> tuple[list[torch.Tensor], list[torch.Tensor], float]:
        assert buffer.targets is not None, "returns.compute(buffer) first"
        v, L = buffer.valid, buffer.rows
        x = buffer.x[v:L].flatten(0, 1)
        actions = buffer.actions[v:L].flatten(0, 1)
        targets = buffer.targets.flatten(0, 1)
        n, mb = x.shape[0], self.config.minibatches
        losses, qs, lr = [], [], self.learner.config.lr
        for _ in range(self.config.epochs):
            order = torch.randperm(n, generator=self.generator).to(x.device)
            for idx in order.view(mb, -1):
                q, _ = self.learner.policy.net.step(x[idx], None, None)
                chosen = q.gather(-1, actions[idx].unsqueeze(-1)).squeeze(-1)
                loss = regression_loss(chosen, targets[idx], self.learner.mixer)
                lr = self.learner.update(loss)
                losses.append(loss.detach())
                qs.append(chosen.detach().mean())
        return losses, qs, lr

    def _recurrent(self, buffer: PQNBuffer) -> tuple[list[torch.Tensor], list[torch.Tensor], float]:
        assert buffer.hidden is not None
        v, L = buffer.valid, buffer.rows
        n, mb = buffer.n_envs, self.config.minibatches
        learner = self.learner
        losses, qs, lr = [], [], learner.config.lr
        for _ in range(self.config.epochs):
            order = torch.randperm(n, generator=self.generator).to(buffer.x.device)
            for idx in order.view(mb, -1):
                q = learner.policy.net.unroll(buffer.x[v:L, idx], buffer.hidden[v, idx], buffer.starts[v:L, idx])
                with torch.no_grad():
                    q_max = masked(q.detach(), buffer.masks[v:L, idx]).max(-1).values
                    targets = learner.returns.targets(buffer.rewards[v:L - 1, idx], buffer.dones[v:L - 1, idx], q_max)
                chosen = q.gather(-1, buffer.actions[v:L, idx].unsqueeze(-1)).squeeze(-1)[:-1]
                loss = regression_loss(chosen, targets, learner.mixer)
                lr = learner.update(loss)
                losses.append(loss.detach())
                qs.append(chosen.detach().mean())
        return losses, qs, lr

    def state_dict(self) -> dict[str, Any]:
        return {"optimizer": self.learner.optimizer.state_dict(), "grad_steps": self.learner.grad_steps,
                "generator": self.generator.get_state()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.learner.optimizer.load_state_dict(state["optimizer"])
        self.learner.grad_steps = int(state["grad_steps"])
        self.generator.set_state(state["generator"])


def _learner(config: PQNObjectiveConfig, parts: Any) -> PQNLearner:
    w = parts.wiring
    return PQNLearner(config, parts.policy, parts.critic, parts.returns, w.epochs * w.minibatches * w.total_updates)


register("updater.objective", PQNObjectiveConfig, _learner, family="pqn")
register("updater", PQNUpdaterConfig, None, family="pqn")
