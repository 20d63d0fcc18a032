"""Memory estimates made before anything big is allocated, and refusals with the numbers.

``collector.n_envs = 10**9`` would otherwise build environments one by one until the
machine runs out of memory (taking other processes with it), and ``rollout_length =
10**9`` or ``buffer.capacity = 10**12`` would end in an allocator traceback.  The sizes
are computed here (buffers: their exact tensor sizes); ``harl.envs.footprint.check_sizes``,
the builder's first step, adds them all up with the environments' measured cost (resident
memory, native allocations included) and the subprocess backend's shared memory, and
refuses what does not fit together with one ``ResourceError`` naming the keys, the
estimates and the limit.  ``allocating`` turns an allocator failure that slips past the
estimate into the same kind of message.
"""

from __future__ import annotations

import os
import tracemalloc
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import attrs
import numpy as np
import torch
from gymnasium import spaces

from harl.errors import ResourceError
from harl.nets.heads import action_width, avail_size
from harl.nets.image import storage_bytes

PROBE_ABOVE = 64
"""Environment counts up to this are built without measuring one first."""
MIN_ENV_BYTES = 64 * 1024
"""The least an environment is assumed to cost (its Python objects, arrays, simulator)."""
UPDATE_FACTOR = 2
"""An on-policy update holds per-agent batches about as large as the rollout buffer again."""


def human(n: float) -> str:
    """``1.2 GB``-style sizes (powers of 1000, as ``df -H`` and ``free --si`` print them)."""
    for unit in ("B", "kB", "MB", "GB", "TB", "PB"):
        if abs(n) < 1000 or unit == "PB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    raise AssertionError("unreachable")


def available_bytes(device: torch.device | str = "cpu") -> int | None:
    """Memory free for new allocations on ``device`` now (None where it cannot be told)."""
    device = torch.device(device)
    if device.type == "cuda":
        return int(torch.cuda.mem_get_info(device)[0])
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def refuse_if_too_big(need: int, what: str, fix: str, source: str, device: torch.device | str = "cpu") -> None:
    """``ResourceError`` when ``need`` bytes exceed what ``device`` has available now."""
    free = available_bytes(device)
    if free is not None and need > free:
        raise ResourceError(f"{source}: {what} need about {human(need)}, but {human(free)} of memory is "
                            f"available ({torch.device(device).type}); {fix}")


def resident_bytes() -> int:
    """This process's resident set now (Linux ``/proc/self/statm``; else its peak, ``getrusage``)."""
    try:
        with open("/proc/self/statm", encoding="ascii") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        import resource

        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def heap_bytes() -> int | None:
    """Bytes the C heap holds now (glibc's ``mallinfo2``: in use, mmapped blocks included); None
    where there is no glibc.  Unlike the resident set it grows by what is allocated even when the
    process reuses pages freed earlier (a long-lived process, a test session)."""
    try:
        import ctypes

        class MallInfo2(ctypes.Structure):
            _fields_ = [(name, ctypes.c_size_t) for name in (
                "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks",
                "keepcost")]

        libc = ctypes.CDLL("libc.so.6")
        libc.mallinfo2.restype = MallInfo2
        info = libc.mallinfo2()
        return int(info.uordblks + info.hblkhd)
    except (OSError, AttributeError):
        return None


def measure_env_bytes(make: Any, count: int = 3) -> int:
    """Bytes one environment holds: ``count`` built after a first one (which pays the imports),
    the largest of the resident set's growth, the C heap's (native memory: an mpe2 env's render
    surfaces, about 2 MB, of which ``tracemalloc`` sees 18 kB) and ``tracemalloc``'s count,
    divided by ``count``."""
    make().close()
    built: list[Any] = []
    started = not tracemalloc.is_tracing()
    rss, heap = resident_bytes(), heap_bytes()
    if started:
        tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for _ in range(count):
            built.append(make())
        traced = tracemalloc.get_traced_memory()[0] - before
    finally:
        if started:
            tracemalloc.stop()
        grown = resident_bytes() - rss
        after = heap_bytes()
        if heap is not None and after is not None:
            grown = max(grown, after - heap)
        for env in built:
            env.close()
    return max(MIN_ENV_BYTES, grown // count, traced // count)


def _observation_bytes(observation_spaces: Sequence[spaces.Box], state_dim: int,
                       state_space: spaces.Space | None) -> int:
    """Bytes of every agent's observation and the state, as stored (uint8 images: 1 byte a value)."""
    state = 4 * state_dim if state_space is None else storage_bytes(state_space) * state_dim
    return sum(storage_bytes(s) * int(np.prod(s.shape)) for s in observation_spaces) + state


def rollout_bytes_per_step(observation_spaces: Sequence[spaces.Box], action_spaces: Sequence[spaces.Space],
                           state_dim: int, fp_state: bool, hidden_size: int, critic_hidden_size: int,
                           state_space: spaces.Space | None = None, record_bytes: int = 0) -> int:
    """Bytes the rollout buffer holds per env step (all agents; see ``RolloutBuffer``); ``record_bytes``:
    the policy's own step-record fields (``record_field_bytes``)."""
    agents = len(action_spaces)
    values = agents if fp_state else 1
    floats = (sum(avail_size(s) + 2 * action_width(s) for s in action_spaces)
              + 2 * agents + 4 * values + 1
              + agents * hidden_size + values * critic_hidden_size)
    return _observation_bytes(observation_spaces, state_dim, state_space) + 4 * floats + 2 + record_bytes


FieldSpecs = Mapping[str, tuple[tuple[int, ...], torch.dtype, Any]]
"""A policy's ``record_fields``: name -> (per-env shape, dtype, fill)."""


def record_field_bytes(fields: FieldSpecs | None) -> int:
    """Bytes per env step of a policy's own step-record fields (``StepRecord.extras``: a recurrent Sable's
    three retention states, 48 KiB at its defaults; MAT's decoding orders), as the rollout buffer stores them."""
    return sum(int(np.prod(shape)) * dtype.itemsize for shape, dtype, _ in (fields or {}).values())


def planned_record_bytes(objective: Any, n_agents: int) -> int:
    """``record_field_bytes`` of the policy an ``[updater.objective]`` will build, from its config alone: its
    ``record_fields(n_agents)`` where it has one (Sable's); MAT's decoding orders (``order`` random or episode:
    one int64 per agent); else 0."""
    fields = getattr(objective, "record_fields", None)
    if callable(fields):
        return record_field_bytes(fields(n_agents))
    if getattr(objective, "order", "fixed") != "fixed" and not getattr(objective, "decentralised", False):
        return 8 * n_agents
    return 0


def check_rollout(per_step: int, rollout_length: int, n_envs: int, source: str, device: torch.device) -> None:
    """Refuse a rollout buffer (and the update's copies of it) that cannot fit."""
    steps = (rollout_length + 1) * n_envs
    refuse_if_too_big(
        UPDATE_FACTOR * per_step * steps,
        f"collector.rollout_length = {rollout_length:,} x collector.n_envs = {n_envs:,}: the rollout buffer "
        f"({per_step:,} bytes per env step, {human(per_step * steps)}) and the update's batches",
        "lower collector.rollout_length or collector.n_envs", source, device)


def replay_bytes_per_transition(observation_spaces: Sequence[spaces.Box],
                                action_spaces: Sequence[spaces.Space], state_dim: int,
                                state_space: spaces.Space | None = None) -> int:
    """Bytes the replay buffer holds per transition (see ``ReplayBuffer``'s layout)."""
    agents = len(action_spaces)
    floats = sum(2 * avail_size(s) + action_width(s) for s in action_spaces) + 2 * agents
    return 2 * _observation_bytes(observation_spaces, state_dim, state_space) + 4 * floats + 2


def check_replay(per_transition: int, capacity: int, source: str, device: torch.device) -> None:
    """Refuse a replay buffer that cannot fit once full (its storage is touched as it fills)."""
    refuse_if_too_big(
        per_transition * capacity,
        f"buffer.capacity = {capacity:,}: the replay buffer ({per_transition:,} bytes per transition x "
        f"{capacity:,} transitions) would",
        "lower buffer.capacity", source, device)


BYTES_PER_PARAMETER = 16
"""What one trained float32 parameter holds: its value, its gradient and Adam's two moments, 4 bytes each."""


@attrs.frozen
class NetworkNeed:
    """The networks of one slot, counted before they are built: what (with the numbers), bytes, keys."""

    what: str
    bytes: int
    keys: str


def linear_parameters(n_in: int, n_out: int, bias: bool = True) -> int:
    return n_in * n_out + (n_out if bias else 0)


def mlp_parameters(n_in: int, hidden: Sequence[int], n_out: int) -> int:
    """Weights and biases of ``Linear(n_in, h0) ... Linear(h_last, n_out)`` (a LayerNorm after a layer adds
    2 x its width; left out: a lower bound); ``n_in = 0`` leaves out the first layer (an image encoder's)."""
    widths = [n_in, *hidden, n_out] if n_in else [*hidden, n_out]
    return sum(linear_parameters(a, b) for a, b in zip(widths, widths[1:]))


def transformer_parameters(obs_dim: int, action_dim: int, discrete: bool, n_agents: int, n_block: int, n_embd: int,
                           decentralised: bool = False, share_actor: bool = False) -> int:
    """The parameters of ``harl.policy.mat.MultiAgentTransformer`` with these sizes, exactly, without building it
    (``tests/test_sizes.py`` holds the two to each other)."""
    e = n_embd
    norm = 2 * e
    attention = 4 * linear_parameters(e, e)
    mlp = 2 * linear_parameters(e, e)

    def head(n_out: int) -> int:
        return linear_parameters(e, e) + norm + linear_parameters(e, n_out)

    encoder = 2 * obs_dim + linear_parameters(obs_dim, e) + norm + n_block * (attention + mlp + 2 * norm) + head(1)
    if decentralised:
        own = 2 * obs_dim + linear_parameters(obs_dim, e) + norm + linear_parameters(e, e) + norm + \
            linear_parameters(e, action_dim)
        decoder = (1 if share_actor else n_agents) * own
    else:
        token = action_dim + 1 if discrete else action_dim
        decoder = linear_parameters(token, e, bias=not discrete) + norm + n_block * (2 * attention + mlp + 3 * norm) + \
            head(action_dim)
    return encoder + decoder + (0 if discrete else action_dim)


def _flat(space: Any) -> int:
    """A flat Box's width; 0 for an image (its encoder is no MLP layer)."""
    shape = getattr(space, "shape", None) or ()
    return int(np.prod(shape)) if len(shape) == 1 else 0


def _head_width(space: spaces.Space) -> int:
    return int(np.prod(space.shape)) if isinstance(space, spaces.Box) else avail_size(space)


def _said(n: int) -> str:
    return f"{n:,} parameters with their gradients and Adam's two moments ({human(n * BYTES_PER_PARAMETER)})"


NETWORKS_COUNTED_FROM = 16 * 1000**2
"""Networks that take less (under a million parameters: every shipped pipeline's) are left out of the size
check: next to buffers of megabytes they change nothing, and a refusal names only what matters."""


def network_needs(spec: Any, observation_spaces: Sequence[Any], action_spaces: Sequence[spaces.Space],
                  state_space: Any, members: int = 1, at_least: int = NETWORKS_COUNTED_FROM) -> list[NetworkNeed]:
    """The networks a pipeline will build and train, counted from its keys and the env's spaces before any is
    built: MAT's transformer exactly; the actors' and critics' MLPs from their hidden sizes (a lower bound: no
    LayerNorm, GRU, image encoder, second twin or target copy).  A ``[teams]`` pipeline: each learning team's,
    each counted with one actor (its agents are known only once the env is open).  ``members``: a population's.
    Those under ``at_least`` bytes are left out."""
    teams = [t.spec for t in getattr(spec, "teams", ()) or () if t.spec is not None]
    found: list[NetworkNeed] = []
    who = f"{members} members x " if members > 1 else ""
    for own in teams or [spec]:
        at = f"teams.{next(t.name for t in spec.teams if t.spec is own)}." if teams else ""
        objective: Any = getattr(own.updater, "objective", None)
        if hasattr(objective, "n_block") and hasattr(objective, "n_embd"):  # MAT's, MAT-Dec's transformer
            space = action_spaces[0]
            if not isinstance(space, (spaces.Discrete, spaces.Box)):
                continue  # MAT refuses it when it is built, in its own words
            discrete = isinstance(space, spaces.Discrete)
            width = max(_flat(o) for o in observation_spaces)
            width += len(action_spaces) if getattr(objective, "agent_id", False) else 0  # the agents' one-hot ids
            n = transformer_parameters(width, _head_width(space), discrete,
                                       1 if teams else len(action_spaces), objective.n_block, objective.n_embd,
                                       bool(getattr(objective, "decentralised", False)),
                                       bool(getattr(objective, "share_actor", False)))
            found.append(NetworkNeed(
                f"{who}{at}updater.objective.n_block = {objective.n_block:,} and n_embd = {objective.n_embd:,}: the "
                f"transformer's {_said(n * members)}", n * members * BYTES_PER_PARAMETER,
                f"{at}updater.objective.n_block or {at}updater.objective.n_embd"))
            continue
        hidden = tuple(getattr(own.policy, "hidden_sizes", ()) or ())
        if hidden:
            agents = range(1 if teams or getattr(own.policy, "share_parameters", False) else len(action_spaces))
            n = sum(mlp_parameters(_flat(observation_spaces[i]), hidden, _head_width(action_spaces[i])) for i in agents)
            found.append(NetworkNeed(f"{who}{at}policy.hidden_sizes = {list(hidden)}: the actors' {_said(n * members)}",
                                     n * members * BYTES_PER_PARAMETER, f"{at}policy.hidden_sizes"))
        hidden = tuple(getattr(own.critic, "hidden_sizes", ()) or ())
        if hidden:
            n = mlp_parameters(_flat(state_space) if state_space is not None else 0, hidden, 1)
            found.append(NetworkNeed(f"{who}{at}critic.hidden_sizes = {list(hidden)}: the critic's {_said(n * members)}",
                                     n * members * BYTES_PER_PARAMETER, f"{at}critic.hidden_sizes"))
    return [need for need in found if need.bytes >= at_least]


LOWER = ("collector.n_envs, collector.rollout_length, buffer.capacity; the networks': policy.hidden_sizes, "
         "critic.hidden_sizes, updater.objective.n_block and n_embd")
"""The keys that size what ``allocating`` guards."""


@contextmanager
def allocating(what: str, source: str) -> Iterator[None]:
    """An allocator failure inside the block becomes a ``ResourceError`` naming ``what``."""
    try:
        yield
    except MemoryError:
        raise ResourceError(f"{source}: out of memory while building {what}; lower the sizes "
                            f"({LOWER})") from None
    except RuntimeError as exc:
        if "memory" not in str(exc).lower():
            raise
        detail = str(exc).strip().splitlines()[0]
        raise ResourceError(f"{source}: out of memory while building {what} ({detail}); lower the sizes "
                            f"({LOWER})") from None


MAT_SQUARE_PER_BLOCK = 3
"""(B, heads, N, N) tensors a MAT block keeps for its backward pass: each attention's softmax output (the
encoder's one, the decoder's self- and cross-attention)."""
SABLE_SQUARE_PER_BLOCK = 4
"""(B, heads, S, S) tensors an unchunked Sable block keeps (the decay matrices and Q K^T products its three
retentions save, some shared)."""
SQUARE_TRANSIENT = 3
"""(B, heads, N, N) tensors alive at once beyond those kept: the scores being masked and normalised, and the
backward pass's gradients of them."""
TOKEN_FLOATS_PER_BLOCK = {"mat": 40, "sable": 80}
"""Floats per token and width one block keeps for its backward pass (projections, norms, gates, the feed-forward
part; Sable's: three RMSNorms, gated retention with its group norm, a SwiGLU of three matrices)."""
TOKEN_FLOATS_FIXED = 24
"""The same for the embeddings and heads outside the blocks.  These constants were set from
``benchmarks/sable_scale.py``'s peaks at 512 and 1,024 agents (width 64, one block: MAT 60 floats per token and
width and 5.6 N^2 floats per step measured, predicted 64 and 6; Sable 106 and 6.4, predicted 104 and 7)."""


def team_model_train_bytes(kind: str, steps: int, n_agents: int, width: int, n_head: int, n_block: int,
                           obs_dim: int, chunk: int = 0, timesteps: int = 1) -> int:
    """Predicted activation bytes of one training minibatch of ``steps`` env steps through a team sequence
    model (``kind``: "mat" or "sable"): the linear part, ``steps x n_agents`` tokens of ``width`` floats kept
    per layer, and the quadratic part, the (heads, S, S) products of attention or unchunked retention over
    S tokens (MAT: the N agents of a step; Sable: the T x N tokens of a rollout of ``timesteps`` steps, the
    feed-forward variant's T = 1).  ``chunk`` (Sable's ``agents_chunk_size``) replaces S x S by chunk x chunk:
    Sable's memory is then linear in the agents.  A prediction to refuse or skip what cannot fit, not an exact
    count (``benchmarks/sable_scale.py`` sets it beside the measured peaks)."""
    tokens = steps * n_agents
    if kind not in TOKEN_FLOATS_PER_BLOCK:
        raise ValueError(f"team_model_train_bytes: kind must be mat or sable, got {kind!r}")
    linear = 4 * tokens * (width * (TOKEN_FLOATS_PER_BLOCK[kind] * n_block + TOKEN_FLOATS_FIXED) + 3 * obs_dim)
    if kind == "mat":
        square = (MAT_SQUARE_PER_BLOCK * n_block + SQUARE_TRANSIENT) * steps * n_head * n_agents ** 2
    else:
        if chunk:
            square = (SABLE_SQUARE_PER_BLOCK * n_block + SQUARE_TRANSIENT) * steps * n_head * chunk * n_agents
        else:
            seq = timesteps * n_agents
            square = (SABLE_SQUARE_PER_BLOCK * n_block + SQUARE_TRANSIENT) * (steps // timesteps) * n_head * seq ** 2
    return linear + 4 * square
