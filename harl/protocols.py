"""What each slot's built stage offers its callers (docs/architecture.md, "Slots, protocols and shapes"): the types of ``Stages``.

The Trainer's loop over them::

    stats = stages.collector.collect(stages.buffer)      # Collector -> Collected (.row())
    stages.returns.compute(stages.buffer)                # ReturnComputer
    update = stages.updater.update(stages.buffer, p)     # Updater -> UpdateResult (.row())

A stage's ``buffer`` argument stays ``Any``: a family's collector, returns stage and updater agree on
their own buffer class (``RolloutBuffer``, ``ReplayBuffer``, ``EpisodeBuffer``), which a protocol of
this layer cannot name.  A user's stage need not inherit anything: mypy checks these structurally, and at build
time ``harl.registry.check_protocol`` checks that the names in ``registry.PROTOCOLS`` exist
(a test keeps the two lists in step).  The policy and the critic network are ``torch.nn.Module``s.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:  # the words of this layer import nothing heavy
    import torch


class Collected(Protocol):
    """What one ``collect`` reports."""

    @property
    def env_steps(self) -> int: ...

    @property
    def episodes(self) -> list[dict[str, Any]]:
        """One dict per finished episode: ``return``, ``length`` and env metrics."""
        ...

    def row(self) -> dict[str, Any]:
        """The metrics.csv columns of what collection found out itself ({} for none): a teams run's
        returns per team, a self-play pool's games and ratings."""
        ...


class Buffer(Protocol):
    """Storage a collector fills with one record per vector step (``harl.buffers.records``)."""

    def insert(self, record: Any) -> None: ...


class Collector(Protocol):
    """Runs the policy in the envs and hands the buffer its records."""

    @property
    def steps_per_iteration(self) -> int: ...

    def collect(self, buffer: Any) -> Collected: ...


class ReturnComputer(Protocol):
    """Turns a filled buffer's rewards and values into targets, handed back through the buffer's
    declared interface (``RolloutBuffer.set_targets``)."""

    def compute(self, buffer: Any) -> object: ...


class UpdateResult(Protocol):
    def row(self) -> dict[str, Any]:
        """The metrics.csv columns of this update."""
        ...


class Updater(Protocol):
    """Turns a filled buffer into a better policy and critic."""

    def update(self, buffer: Any, progress: float) -> UpdateResult: ...

    def state_dict(self) -> dict[str, Any]: ...

    def load_state_dict(self, state: dict[str, Any]) -> None: ...


class Script(Protocol):
    """A scripted team's agents (``harl.teams.scripted``): built by ``factory(config, obs_spaces,
    act_spaces, seed)``, they act from what they observe and never learn."""

    def act(self, obs: list[torch.Tensor], avail: list[torch.Tensor | None] | None,
            starts: torch.Tensor) -> list[torch.Tensor]:
        """Per agent ``(E, obs_dim)`` observations, ``(E, n)`` masks (1 = allowed; None: all) and the
        ``(E,)`` episode starts -> one action per agent, as a policy gives them: ``(E, k)`` floats."""
        ...


SLOT_PROTOCOLS: dict[str, type] = {"collector": Collector, "returns": ReturnComputer, "script": Script}
"""The slots whose ``registry.PROTOCOLS`` names these Protocols' members must include."""
