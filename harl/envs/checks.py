"""What an environment hands back, checked against its declared spaces.

A custom env that breaks the ``MultiAgentEnv`` protocol (a tuple where an ``EnvStep``
belongs, one observation too few, a reward per env instead of per agent, a string
reward) should be told which env, which agent and which field is wrong, not meet a
numpy traceback three calls later.  ``EnvOutputCheck`` does the full check on the
first ``FULL_CHECK_STEPS`` vector steps and on every reset before that (a wrong shape
or type shows on the first step); ``check_finite`` runs on every vector step, on the
stacked batch, where it costs one vectorised pass (see docs/reliability.md for the
measured cost of checking every step in full).

Observations and states are cast to float32, so an env that builds them in float64
(numpy's default) just works; uint8 ones (images) stay uint8, a quarter of the bytes.
A per-agent ``None`` in ``avail`` means "no mask for this agent": ``stack_avail`` fills
in "everything allowed".
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np
from gymnasium import spaces

from harl.envs.protocol import EnvStep
from harl.errors import EnvProtocolError, NonFiniteError

FULL_CHECK_STEPS = 8
"""Vector steps (and the resets until then) whose outputs get the full protocol check."""

_NUMERIC = "biuf"
"""numpy dtype kinds accepted for observations, states and rewards (bool, ints, floats)."""


def avail_width(space: spaces.Space) -> int:
    """Width of an agent's available-action mask (0 for Box: it has none)."""
    if isinstance(space, spaces.Discrete):
        return int(space.n)
    if isinstance(space, spaces.MultiDiscrete):
        return int(np.sum(space.nvec))
    return 0


def describe_env(config: Any) -> str:
    """``'python env "my_env:make_env"'`` or ``'mpe env'``: how messages name the env kind."""
    kind = getattr(config, "kind", type(config).__name__)
    factory = getattr(config, "factory", None)
    return f'{kind} env "{factory}"' if factory else f"{kind} env"


def _kind(value: Any) -> str:
    if isinstance(value, np.ndarray):
        return f"an array of shape {value.shape} and dtype {value.dtype}"
    if value is None:
        return "None"
    text = repr(value)
    shown = f" {text}" if len(text) <= 40 else ""
    if isinstance(value, (tuple, list)):
        return f"a {type(value).__name__} of {len(value)} values{shown}"
    return f"{type(value).__name__}{shown}"


class EnvOutputCheck:
    """Checks one env copy's ``reset`` and ``step`` results; cheap after the first steps."""

    def __init__(self, name: str, n_agents: int, observation_spaces: Sequence[spaces.Box],
                 action_spaces: Sequence[spaces.Space], state_space: spaces.Box) -> None:
        self.name = name
        self.n_agents = n_agents
        self.obs_shapes = [tuple(s.shape) for s in observation_spaces]
        self.state_shape = tuple(state_space.shape)
        self.action_spaces = list(action_spaces)
        self.widths = [avail_width(s) for s in action_spaces]
        self.steps_left = FULL_CHECK_STEPS
        self.blank_images = {i for i, s in enumerate(observation_spaces) if len(s.shape) == 3}
        """Agents with image observations not yet seen to hold two different pixel values."""

    @property
    def active(self) -> bool:
        return self.steps_left > 0

    def counted_step(self) -> None:
        """One vector step done: fewer full checks left; the last one warns about blank images."""
        self.steps_left -= 1
        if self.steps_left == 0 and self.blank_images:
            agents = ", ".join(str(i) for i in sorted(self.blank_images))
            warnings.warn(
                f"{self.name}: the image observations of agent(s) {agents} were one flat colour in every "
                f"env, at every reset and for the first {FULL_CHECK_STEPS} steps; nothing can be learned "
                "from them. The env may not be drawing its screen: PettingZoo's cooperative_pong, for "
                'one, draws only when a render mode is set ([env.kwargs] render_mode = "rgb_array").',
                RuntimeWarning, stacklevel=3)

    def _fail(self, k: int, what: str) -> EnvProtocolError:
        return EnvProtocolError(
            f"{self.name}, environment {k}: {what}; see the MultiAgentEnv protocol in "
            "harl/envs/protocol.py"
        )

    def reset(self, k: int, result: Any) -> tuple[list[np.ndarray], np.ndarray, Any]:
        if not isinstance(result, (tuple, list)) or len(result) != 3:
            raise self._fail(k, f"reset() returned {_kind(result)}, expected a tuple (obs, state, avail) "
                                "with avail None where the env has no masks")
        obs, state, avail = result
        self._observations(k, "reset", obs)
        self._array(k, "reset", "state", state, self.state_shape)
        self._avail(k, "reset", avail)
        return result[0], result[1], result[2]

    def step(self, k: int, step: Any) -> EnvStep:
        if not isinstance(step, EnvStep):
            raise self._fail(k, f"step() returned {_kind(step)}, expected harl.envs.protocol.EnvStep(obs, "
                                "state, avail, rewards, terminated, truncated, active=None, info={})")
        self._observations(k, "step", step.obs)
        self._array(k, "step", "state", step.state, self.state_shape)
        self._array(k, "step", "rewards", step.rewards, (self.n_agents,))
        self._avail(k, "step", step.avail)
        for field in ("terminated", "truncated"):
            value = getattr(step, field)
            if not isinstance(value, (bool, np.bool_)):
                raise self._fail(k, f"step() field {field}: expected a bool, got {_kind(value)}")
        if step.active is not None:
            self._array(k, "step", "active", step.active, (self.n_agents,))
        return step

    def _observations(self, k: int, call: str, obs: Any) -> None:
        if not isinstance(obs, (list, tuple)) or len(obs) != self.n_agents:
            count = f"{len(obs)} observations" if isinstance(obs, (list, tuple)) else _kind(obs)
            raise self._fail(k, f"{call}() obs: expected a list of {self.n_agents} observations (one per "
                                f"agent), got {count}")
        for i, o in enumerate(obs):
            self._array(k, call, "obs", o, self.obs_shapes[i], agent=i)
        self.blank_images -= {i for i in self.blank_images if np.ptp(obs[i]) > 0}

    def _array(self, k: int, call: str, field: str, value: Any, shape: tuple[int, ...],
               agent: int | None = None) -> None:
        who = "" if agent is None else f"agent {agent} "
        array = np.asarray(value) if isinstance(value, (np.ndarray, list, tuple, int, float, np.number)) else None
        if array is None or array.dtype.kind not in _NUMERIC:
            raise self._fail(k, f"{call}() {who}{field}: expected numbers of shape {shape}, got {_kind(value)}")
        if array.shape != shape:
            raise self._fail(k, f"{call}() {who}{field}: expected shape {shape}, got {array.shape}")

    def _avail(self, k: int, call: str, avail: Any) -> None:
        if avail is None:
            return
        if not isinstance(avail, (list, tuple)) or len(avail) != self.n_agents:
            raise self._fail(k, f"{call}() avail: expected None or a list of {self.n_agents} masks (None for "
                                f"an agent without one), got {_kind(avail)}")
        for i, (mask, width) in enumerate(zip(avail, self.widths)):
            if mask is None:
                continue
            size = np.size(mask)
            if width == 0 and size:
                raise self._fail(k, f"{call}() agent {i} avail: a mask of {size} entries for a "
                                    f"{type(self.action_spaces[i]).__name__} action space, which has "
                                    "no discrete choices to mask; give None for this agent")
            if np.shape(mask) != (width,):
                raise self._fail(k, f"{call}() agent {i} avail: expected a mask of shape ({width},) for "
                                    f"{self.action_spaces[i]}, got shape {np.shape(mask)}")


def stack_avail(avails: Sequence[Sequence[Any] | None], widths: Sequence[int]) -> list[np.ndarray] | None:
    """Per agent, the ``(n_envs, width)`` masks of ``avails`` (one entry per env).

    None when no env gives a mask.  A None (for an env, or for one agent of an env) means
    every action is allowed.
    """
    if all(a is None for a in avails):
        return None
    n = len(avails)
    out = []
    for i, width in enumerate(widths):
        masks = [None if a is None else a[i] for a in avails]
        if all(m is None for m in masks):
            out.append(np.ones((n, width), dtype=np.float32))
        else:
            out.append(np.stack([np.ones(width, dtype=np.float32) if m is None else m for m in masks]))
    return out


def as_stored(batch: np.ndarray) -> np.ndarray:
    """``batch`` as float32 (a float64 or integer observation from a user's env is cast); uint8 kept."""
    return batch if batch.dtype in (np.float32, np.uint8) else batch.astype(np.float32)


def check_finite(name: str, field: str, batch: np.ndarray, agent: int | None = None) -> None:
    """Raise ``NonFiniteError`` naming the env, agent and field when ``batch`` holds NaN or inf.

    ``batch`` has the env index first (per agent: ``(n_envs, ...)``; rewards:
    ``(n_envs, n_agents)``, whose second axis names the agent).
    """
    finite = np.isfinite(batch)
    if finite.all():
        return
    bad = np.argwhere(~finite)[0]
    k = int(bad[0])
    if agent is None and field == "rewards":
        agent = int(bad[1])
    value = batch[tuple(bad)]
    who = "" if agent is None else f", agent {agent}"
    raise NonFiniteError(
        f"{name}, environment {k}{who}: {field} holds {value} (NaN or infinity); harl trains only on "
        "finite numbers: fix the environment (clip or guard the computation) or wrap it to replace them"
    )
