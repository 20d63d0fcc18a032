"""Users' stages for the registry tests: good ones and each way one can be wrong."""

from __future__ import annotations

from typing import Any

import attrs

from harl.registry import register
from harl.returns.gae import GAE, GAEConfig
from harl.settings import in_range, positive, setting


@attrs.frozen
class ScaledReturnsConfig:
    """GAE advantages times ``scale``."""

    scale: float = setting(1.0, "factor on every advantage", in_range(0, None))
    horizon: int = setting(5, "unused; an integer key to type-check", positive())
    label: str = setting("x", "unused; a string key to type-check")


class ScaledReturns:
    def __init__(self, config: ScaledReturnsConfig) -> None:
        self.config = config
        self.gae = GAE(GAEConfig())

    def compute(self, buffer: Any) -> Any:
        stats = self.gae.compute(buffer)
        buffer.set_targets(buffer.advantages * self.config.scale, buffer.returns)
        return stats


register("returns", ScaledReturnsConfig, lambda config, parts: ScaledReturns(config), family="on_policy")


@attrs.frozen
class NoComputeConfig:
    """A return computer whose stage lacks ``compute``."""


register("returns", NoComputeConfig, lambda config, parts: object(), family="on_policy")


@attrs.frozen
class UserCriticConfig:
    """Registered in the critic slot (so wrong under [returns])."""


register("critic", UserCriticConfig, None, family="on_policy", provides=("state_values",))


@attrs.frozen
class UnregisteredConfig:
    """An attrs class nobody registered."""


class NotAttrs:
    """A plain class."""


@attrs.frozen
class PrintSinkConfig:
    """A user's logging sink: prints each row."""

    prefix: str = setting("row", "printed before each row")


class PrintSink:
    def __init__(self, config: PrintSinkConfig) -> None:
        self.config = config

    def write(self, row: dict[str, Any]) -> None:
        print(self.config.prefix, row)

    def close(self, *args: Any) -> None:
        pass


register("sink", PrintSinkConfig, lambda config, *context: PrintSink(config), kind="print")


@attrs.frozen
class FlakyReturnsConfig:
    """GAE that raises on its ``fail_at``-th call (0: never): a user's stage failing mid-run."""

    fail_at: int = setting(0, "the call that raises (0: none)", in_range(0, None))


class FlakyReturns:
    def __init__(self, config: FlakyReturnsConfig) -> None:
        self.config = config
        self.gae = GAE(GAEConfig())
        self.calls = 0

    def compute(self, buffer: Any) -> Any:
        self.calls += 1
        if self.calls == self.config.fail_at:
            raise ValueError(f"flaky on call {self.calls}")
        return self.gae.compute(buffer)


register("returns", FlakyReturnsConfig, lambda config, parts: FlakyReturns(config), family="on_policy")
