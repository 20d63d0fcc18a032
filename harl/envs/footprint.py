"""What a pipeline will take of memory, all of it checked together before the first allocation.

``check_sizes(spec, source, device)`` is the composition root's first step (and a
population's, with ``members``): it builds one env of the pipeline (its spaces size every
buffer), measures what envs really cost when many are asked for, and adds up

- the environments, training (``collector.n_envs``, times the members) and evaluation
  (``evaluator.n_envs``), at the measured cost of one;
- the buffers, as the pipeline's family reports them (``family.memory``: the rollout buffer
  with the update's batches, the replay buffer once full, an episode replay; a population's
  ``population.memory``);
- the networks, counted from their keys (``harl.sizes.network_needs``: MAT's transformer exactly,
  the actors' and critics' MLPs from their hidden sizes), each parameter with its gradient and
  Adam's two moments;
- with ``collector.backend = "subprocess"``, the shared-memory segment of the per-step arrays,
  against the free space of ``/dev/shm`` (containers often cap it at 64 MB).

Host memory needs are compared, summed, with the memory available now; buffers on a GPU with
the device's free memory.  What does not fit is one ``ResourceError`` paragraph with every
number and the keys to lower.

Why resident memory: an env's cost is mostly outside Python's allocator (an mpe2 env holds
about 2 MB of pygame render surfaces, of which ``tracemalloc`` sees 18 kB), so ``k`` envs are
built after a first one (which pays the imports) and the growth of the process's resident set
(``/proc/self/statm``) is divided by ``k``; the larger of that, ``tracemalloc``'s count and
``harl.sizes.MIN_ENV_BYTES`` is taken.  Only when more than ``harl.sizes.PROBE_ABOVE`` envs
are asked for: small pipelines pay for the one env that gives the spaces.
"""

from __future__ import annotations

import os
from typing import Any

import attrs
import torch

from harl import registry
from harl.envs.registry import make_env, vector_factory
from harl.envs.vector.shared import StepLayout
from harl.errors import ResourceError
from harl.sizes import PROBE_ABOVE, available_bytes, human, measure_env_bytes, network_needs

MEASURED_ENVS = 3
"""Envs built (after a first one) to measure what one costs."""
SHM = "/dev/shm"


@attrs.frozen
class Spaces:
    """The spaces of the pipeline's env (what ``family.memory`` reads)."""

    observation_spaces: Any
    action_spaces: Any
    state_space: Any
    n_agents: int


@attrs.frozen
class Item:
    """One part of the need: what it is (with its numbers), bytes, keys that size it, where it lives."""

    what: str
    bytes: int
    keys: str
    device: str = "cpu"


def probe(env_config: Any, measure: int) -> tuple[Spaces, int]:
    """Build one env (its spaces) and, with ``measure`` > 0, that many more to measure what one holds:
    (spaces, bytes per env; 0 when not measured).  Every env built is closed."""
    first = make_env(env_config)
    try:
        spaces = Spaces(list(first.observation_spaces), list(first.action_spaces), first.state_space,
                        int(first.n_agents))
        if measure <= 0:
            return spaces, 0
        return spaces, measure_env_bytes(lambda: make_env(env_config), measure)
    finally:
        first.close()


def shm_free(path: str = SHM) -> int | None:
    """Bytes free in ``path`` (the tmpfs behind POSIX shared memory), None where it cannot be told."""
    try:
        st = os.statvfs(path)
    except (OSError, AttributeError):
        return None
    return st.f_bavail * st.f_frsize


def needs(spec: Any, spaces: Spaces, per_env: int, device: torch.device, members: int = 1) -> list[Item]:
    """Every sized allocation of the pipeline (see the module doc)."""
    items: list[Item] = []
    n_train, n_eval = spec.collector.n_envs * members, spec.evaluator.n_envs
    if per_env:
        who = f"{members} members x " if members > 1 else ""
        items.append(Item(
            f"{who}collector.n_envs = {spec.collector.n_envs:,} and evaluator.n_envs = {n_eval:,}: "
            f"{n_train + n_eval:,} environments of about {human(per_env)} each ({MEASURED_ENVS} built and measured, "
            f"native memory included)", (n_train + n_eval) * per_env,
            "collector.n_envs (and evaluator.n_envs)" + (" or train fewer seeds at once" if members > 1 else "")))
    family = registry.family_of(spec.collector)
    found = family.population.memory(spec, spaces, members) if members > 1 else family.memory(spec, spaces)
    items += [Item(need.what, need.bytes, need.keys, device.type) for need in found]
    nets = network_needs(spec, spaces.observation_spaces, spaces.action_spaces, spaces.state_space, members)
    items += [Item(need.what, need.bytes, need.keys, device.type) for need in nets]
    return items


def shm_need(spec: Any, spaces: Spaces, members: int = 1) -> int:
    """Bytes of the subprocess backend's shared-memory segment (0 for other backends)."""
    if getattr(spec.collector, "backend", "inline") != "subprocess":
        return 0
    return StepLayout.build(spec.collector.n_envs * members, spaces.observation_spaces, spaces.state_space,
                            spaces.action_spaces).size


def refusal(items: list[Item], shm: int, source: str, free: dict[str, int | None],
            shm_left: int | None, n_envs: int) -> str | None:
    """The paragraph refusing what does not fit (None: everything fits)."""
    parts: list[str] = []
    fixes: list[str] = []
    for where in dict.fromkeys(item.device for item in items):
        mine = sorted((i for i in items if i.device == where), key=lambda i: -i.bytes)
        total, left = sum(i.bytes for i in mine), free.get(where)
        if left is None or total <= left:
            continue
        def said(i: Item) -> str:
            return i.what if human(i.bytes) in i.what else f"{i.what} ({human(i.bytes)})"

        if len(mine) == 1:
            parts.append(f"{said(mine[0])} would need about {human(total)}, but {human(left)} of memory is available "
                         f"({where})")
        else:
            parts.append(f"{'; '.join(map(said, mine))} would need about {human(total)} together, but {human(left)} of "
                         f"memory is available ({where})")
        fixes.append(mine[0].keys)
    if shm and shm_left is not None and shm > shm_left:
        parts.append(f'the subprocess backend\'s shared memory for collector.n_envs = {n_envs:,} needs about '
                     f"{human(shm)}, but {SHM} has {human(shm_left)} free (containers often cap it at 64 MB: "
                     'give the container more, e.g. docker run --shm-size=1g, or set collector.backend = "inline")')
        if not any("collector.n_envs" in fix for fix in fixes):
            fixes.append("collector.n_envs")
    if not parts:
        return None
    return f"{source}: {'; and '.join(parts)}; lower {' or '.join(dict.fromkeys(fixes))} (nothing was built)"


def check_sizes(spec: Any, source: str, device: torch.device | str = "cpu", members: int = 1) -> None:
    """Refuse, before anything big is built, a pipeline whose envs, buffers and shared memory do not
    fit together (see the module doc).  A natively vectorised env kind (its batch is tensors) is
    built with one env for its spaces; its batch is covered by ``harl.sizes.allocating``."""
    device = torch.device(device)
    native = vector_factory(spec.env)
    n_total = spec.collector.n_envs * members + spec.evaluator.n_envs
    if native is not None:
        venv = native(spec.env, 1, 0)
        try:
            spaces = Spaces(list(venv.observation_spaces), list(venv.action_spaces), venv.state_space,
                            int(venv.n_agents))
        finally:
            venv.close()
        per_env = 0
    else:
        spaces, per_env = probe(spec.env, MEASURED_ENVS if n_total > PROBE_ABOVE else 0)
    items = needs(spec, spaces, per_env, device, members)
    free = {"cpu": available_bytes("cpu")}
    if device.type != "cpu":
        free[device.type] = available_bytes(device)
    shm = shm_need(spec, spaces, members)
    message = refusal(items, shm, source, free, shm_free() if shm else None, spec.collector.n_envs * members)
    if message is not None:
        raise ResourceError(message)
