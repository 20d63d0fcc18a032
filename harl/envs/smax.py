"""SMAX (jaxmarl's JAX re-implementation of the StarCraft Multi-Agent Challenge) as a ``VectorEnv``.

SMAX stands in for SMAC/SMACv2 where StarCraft II cannot be installed: the allied units
are the agents, the enemy team is played by jaxmarl's heuristic AI (``HeuristicEnemySMAX``),
and the maps are jaxmarl's (3m, 2s3z, 3s5z, 5m_vs_6m, ..., and the SMACv2-style
``smacv2_5_units`` with random unit types and surrounded starts).

The simulator is a pure JAX function, so all ``n_envs`` environments are one ``vmap``-ed
step, compiled once: a vector step is one call into XLA that steps every env, resets the
ended ones (computed for all envs, chosen with ``jnp.where``) and returns the observations,
world states and action masks of both the ended and the new episodes; the arrays become
numpy once per step.  On 3m that is ~50,000 env steps per CPU-second at 256 envs against
~2,000 with one env per call (see docs/environments/smax.md).

- Observations: jaxmarl's ``unit_list`` observation of each ally; its split into entities (other
  allies, enemies, its own) is ``entity_layouts`` and rides on each observation space (and the
  state's on the state space) for ``encoder = "entity"`` (``harl.nets.entity``).
- State (EP): jaxmarl's ``get_world_state`` (every unit's health, position, weapon
  cooldown and type, plus teams and types), one per env.
- ``avail``: jaxmarl's available-action masks (a dead ally may only ``stop``); ``active``
  marks the allies still alive after the step.
- Rewards: jaxmarl's team reward (damage dealt as a fraction of the enemy's health, plus
  1 for a won battle), the same for every ally.
- Episode end: ``terminated`` when one side is wiped out (a win, a loss or a draw),
  ``truncated`` when ``max_episode_steps`` ran out first.  jaxmarl's single ``done`` flag covers
  both; they are told apart from which units are alive.  Each ended episode reports
  ``win`` (1.0 or 0.0), which the evaluator logs as ``eval_win`` (the win rate).

``enemy = "agents"`` builds jaxmarl's base ``SMAX`` instead (the env ``HeuristicEnemySMAX`` wraps):
every unit is an agent, jaxmarl's ``ally_0 ..`` then ``enemy_0 ..``, in the groups ``ally`` and
``enemy``; each agent gets its own side's team reward; the state, masks and ``active`` as above
for all of them.  An ended episode also reports ``winner`` (``"ally"``, ``"enemy"``, or ``""`` for a
draw or a time-out; harl.teams scores self-play games by it) and each side's return
(``return_ally``, ``return_enemy``); ``return`` and ``win`` stay the allies'.  With
``mirror_enemy`` (the default) each enemy sees the battle mirrored left to right (``Mirror``):
on a mirrored map such as 3m, enemy ``k``'s view of a mirrored battle is ally ``n-1-k``'s, so a
policy trained on one side plays the other.  On a map whose sides differ (5m_vs_6m) the sides'
action counts differ; the masks are padded to the widest inside JAX and cut back per agent.

JAX is kept on the CPU and off the Eigen thread pool unless the user says otherwise:
``JAX_PLATFORMS=cpu`` and ``XLA_FLAGS=--xla_cpu_multi_thread_eigen=false`` are set before
JAX first loads (only where those variables are unset), so that a GPU, if present, stays
with torch and the environment does not compete with torch for every core.

Compiling the batched step takes ~10-30 s per map and batch size (the training and
evaluation envs of a run share it when their ``n_envs`` agree); JAX's persistent cache,
``JAX_COMPILATION_CACHE_DIR=~/.cache/jax``, cuts later starts to a few seconds.

jaxmarl is optional: imported only when an environment is built.
"""

from __future__ import annotations

import contextlib
import functools
import os
import sys
from collections.abc import Iterator, Sequence
from typing import Any

import attrs
import numpy as np
from gymnasium import spaces

from harl.envs.protocol import VectorStep
from harl.errors import ConfigError, MissingExtraError
from harl.nets.entity import EntityGroup, EntityLayout, with_entity_layout
from harl.registry import register
from harl.settings import kind_field, one_of, positive, setting

SCENARIOS = ("3m", "2s3z", "3s5z", "5m_vs_6m", "smacv2_5_units")
"""Maps with shipped pipelines and tests; any other jaxmarl map name also works."""

Reset = tuple[list[np.ndarray], np.ndarray, list[np.ndarray] | None]

ENEMIES = ("heuristic", "agents")
"""``[env] enemy``: jaxmarl's heuristic AI plays the enemy, or the enemy's units are agents too."""


@attrs.frozen
class SMAXConfig:
    """``[env] kind = "smax"``: one SMAX map against jaxmarl's heuristic enemy (or with both armies as
    agents: ``enemy = "agents"``), vectorised in JAX."""

    kind: str = kind_field("smax")
    scenario: str = setting("3m", f"SMAX map (tested: {', '.join(SCENARIOS)}; any jaxmarl map name)")
    max_episode_steps: int = setting(100, "steps per episode before truncation", positive())
    attack_mode: str = setting("closest", "how the heuristic enemy picks its target: closest or random",
                               one_of(("closest", "random")))
    see_enemy_actions: bool = setting(True, "observations include the enemies' last actions")
    walls_cause_death: bool = setting(True, "a unit touching the map's edge dies")
    state_norm: bool = setting(
        False, "scale the world state's raw features into [0, 1] as SMAC's state is: positions by the map's "
        "size, weapon cooldowns by the longest, unit type ids by the largest (jaxmarl's are map units, "
        "seconds and ids); QMIX's hypernetworks read the state unnormalised, and on SMAX's raw one its "
        "mixing weights start ~30x too large (qmix_smax_*.toml set it)")
    enemy: str = setting(
        "heuristic", "who plays the enemy army: heuristic (jaxmarl's scripted AI; the allies are the agents) "
        "or agents (jaxmarl's base SMAX: every unit is an agent, ally_0.. then enemy_0.., in the groups "
        "ally and enemy, for two learning teams or self-play)", one_of(ENEMIES))
    mirror_enemy: bool = setting(
        True, 'with enemy = "agents": each enemy sees the battle mirrored left to right and its east and '
        "west moves swap, so on a mirrored map (3m) an enemy's observation means what an ally's does and "
        "a policy trained on one side plays the other (self-play snapshots); false gives jaxmarl's own")


JAXMARL = "jaxmarl==0.2.0"
"""The jaxmarl release harl's SMAX adapter is written and tested against (the README, docs/environments
and noxfile.py pin the same one)."""
MISSING_JAXMARL = (f"pip install --no-deps {JAXMARL} (its dependency gymnax would pin gymnasium < 1.4; "
                   "SMAX needs only what the extra installs)")
"""The second install step, in both errors: the first (no jax) once named only the extra, so
installing SMAX took two rounds."""


def _import_smax() -> tuple[Any, Any, Any]:
    """jax, jax.numpy and jaxmarl's smax module; a clear error when the extra is missing.

    JAX goes to the CPU with single-threaded Eigen unless the user chose otherwise (see the
    module docstring); this only takes effect before JAX's first computation.
    """
    os.environ.setdefault("XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false")
    if "JAX_PLATFORMS" not in os.environ:
        os.environ["JAX_PLATFORMS"] = "cpu"
    try:
        import jax
        import jax.numpy as jnp
    except ImportError as exc:
        error = MissingExtraError('env kind "smax"', "smax", "jax")
        error.args = (f"{error}, then: {MISSING_JAXMARL}",)
        raise error from exc
    if not getattr(jax.config, "jax_platforms", None):  # imported before us, with no platform chosen
        jax.config.update("jax_platforms", os.environ["JAX_PLATFORMS"])
    try:
        with _quiet_import():
            from jaxmarl.environments import smax
    except ImportError as exc:
        error = MissingExtraError('env kind "smax"', "smax", "jaxmarl")
        error.args = (f"{error}, then: {MISSING_JAXMARL}",)
        raise error from exc
    return jax, jnp, smax


@contextlib.contextmanager
def _quiet_import() -> Iterator[None]:
    """Import jaxmarl without its printed notes and without losing ``sys.stdout``/``sys.stderr``.

    jaxmarl prints a line about its optional submodules on import, and its MABrax module
    resets ``sys.stdout``/``sys.stderr`` to the process's originals (undoing any capture,
    pytest's or a progress display's); so fd 1 is pointed at /dev/null meanwhile and the
    stream objects are put back afterwards.
    """
    streams = sys.stdout, sys.stderr
    sys.stdout.flush()
    saved = os.dup(1)
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 1)
        yield
    finally:
        if sys.__stdout__ is not None:
            sys.__stdout__.flush()
        os.dup2(saved, 1)
        os.close(saved)
        os.close(devnull)
        sys.stdout, sys.stderr = streams


def make_smax(config: SMAXConfig) -> Any:
    """The jaxmarl environment the adapter steps (also what the tests compare against)."""
    _, _, smax = _import_smax()
    try:
        scenario = smax.map_name_to_scenario(config.scenario)
    except KeyError:
        from jaxmarl.environments.smax.smax_env import MAP_NAME_TO_SCENARIO

        raise ConfigError(
            f'env.scenario: SMAX has no map "{config.scenario}" (jaxmarl has: '
            f"{', '.join(MAP_NAME_TO_SCENARIO)})"
        ) from None
    # jaxmarl checks its time limit before counting the step just taken, so its episodes
    # last ``max_steps + 1`` steps; one less makes ours last ``config.max_episode_steps``.
    if config.enemy == "agents":  # the base env (HeuristicEnemySMAX wraps it): every unit acts
        return smax.SMAX(
            scenario=scenario, max_steps=config.max_episode_steps - 1,
            see_enemy_actions=config.see_enemy_actions, walls_cause_death=config.walls_cause_death,
        )
    return smax.HeuristicEnemySMAX(
        scenario=scenario, max_steps=config.max_episode_steps - 1, attack_mode=config.attack_mode,
        see_enemy_actions=config.see_enemy_actions, walls_cause_death=config.walls_cause_death,
    )


def state_scale(env: Any) -> np.ndarray:
    """``state_norm``'s factor per feature of jaxmarl's ``get_world_state``: per unit (allies then
    enemies) its health fraction, x, y, weapon cooldown and a one-hot of its type, then every
    unit's team (0 or 1) and type id.  x and y by the map's width and height, cooldowns by the
    longest of any unit type, type ids by the largest; the rest are already in [0, 1]."""
    features = len(env.own_features)
    units = env.state_size // (features + 2)
    per_unit = np.ones(features, np.float32)
    per_unit[1], per_unit[2] = 1.0 / env.map_width, 1.0 / env.map_height
    per_unit[3] = 1.0 / float(np.max(np.asarray(env.unit_type_weapon_cooldowns)))
    types = np.full(units, 1.0 / max(len(np.asarray(env.unit_type_health)) - 1, 1), np.float32)
    return np.concatenate([np.tile(per_unit, units), np.ones(units, np.float32), types])


@attrs.frozen
class Mirror:
    """How an enemy's view is mirrored left to right (``mirror_enemy``), for jaxmarl's ``unit_list``
    observation: per other unit ``health, x, y, last move x, last move y, last target, cooldown,
    type bits`` (x, y relative to the observer), then the observer's own ``health, x, y, cooldown,
    type bits`` (x, y as fractions of the map; all zeros once it is dead).

    The mirror negates every relative x and last move x and turns the own x into ``1 - x`` (a
    living unit's); moves 1 (east) and 3 (west) swap, in actions and in masks.  The unit order
    needs no change: jaxmarl lists an enemy's units in reverse (its own side first), which is
    an ally's order seen from the other end, so enemy ``k``'s mirrored view of a mirrored
    battle is ally ``n - 1 - k``'s.
    """

    sign: np.ndarray
    """``(obs_size,)`` factor per feature: -1 for the x's, else 1."""
    shift: np.ndarray
    """``(obs_size,)`` added where the observer lives: 1 at its own x."""
    health: int
    """The index of the observer's own health (0 once it is dead)."""
    moves: np.ndarray
    """``(n_actions,)`` the mirrored action of each action (east <-> west)."""

    @classmethod
    def of(cls, env: Any, n_actions: int) -> Mirror:
        unit, own = len(env.unit_features), len(env.own_features)
        others = env.obs_size - own
        sign = np.ones(env.obs_size, np.float32)
        sign[1:others:unit] = -1.0  # each other unit's x (relative to the observer)
        sign[3:others:unit] = -1.0  # its last move's x
        sign[others + 1] = -1.0  # the observer's own x ...
        shift = np.zeros(env.obs_size, np.float32)
        shift[others + 1] = 1.0  # ... as 1 - x
        moves = np.arange(n_actions)
        moves[[EAST, WEST]] = WEST, EAST
        return cls(sign, shift, others, moves)

    def obs(self, obs: Any) -> Any:
        """Observations ``(..., obs_size)``, numpy or JAX, seen in the mirror."""
        alive = obs[..., self.health:self.health + 1] > 0
        return obs * self.sign + alive * self.shift

    def actions(self, actions: Any) -> Any:
        """Actions (numpy or JAX integers) into the mirror or back out (its own inverse)."""
        return self.moves[actions]

    def masks(self, masks: Any) -> Any:
        """Action masks ``(..., n_actions)`` seen in the mirror."""
        return masks[..., self.moves]


EAST, WEST = 1, 3
"""jaxmarl's discrete moves: 0 north, 1 east, 2 south, 3 west, 4 stop, then one attack per enemy."""


def action_counts(env: Any, config: SMAXConfig) -> list[int]:
    """Each agent's number of actions: 5 moves and one attack per unit of the other side."""
    if config.enemy == "agents":
        return [env.num_ally_actions] * env.num_allies + [env.num_enemy_actions] * env.num_enemies
    return [env.num_ally_actions] * env.num_allies


def entity_layouts(env: Any, n_agents: int) -> list[EntityLayout]:
    """Each agent's ``unit_list`` observation as entities: a block per other unit of its own side
    (``ally``), a block per unit of the other side (``enemy``), then its own block (``own``).  jaxmarl
    lists an ally's other units in index order and an enemy's in reverse, and numbers each side's
    attack actions the same way (move actions first), so attack action ``5 + k`` targets the ``k``-th
    ``enemy`` block for both sides.  A unit is there when its health (feature 0) is not zero: jaxmarl
    zeroes the block of a dead or unseen unit, and the own block once the agent is dead."""
    unit, own = len(env.unit_features), len(env.own_features)
    layouts = []
    for i in range(n_agents):
        mine, theirs = ((env.num_allies, env.num_enemies) if i < env.num_allies
                        else (env.num_enemies, env.num_allies))
        groups = (EntityGroup("ally", 0, mine - 1, unit), EntityGroup("enemy", (mine - 1) * unit, theirs, unit),
                  EntityGroup("own", (mine + theirs - 1) * unit, 1, own))
        layouts.append(EntityLayout(groups, env.obs_size, targets="enemy", target_offset=env.num_movement_actions,
                                    presence=0))
    return layouts


def state_entity_layout(env: Any) -> EntityLayout:
    """jaxmarl's world state as entities: a block per ally, then per enemy (``get_world_state``)."""
    width = len(env.own_features)
    return EntityLayout((EntityGroup("ally", 0, env.num_allies, width),
                         EntityGroup("enemy", env.num_allies * width, env.num_enemies, width)), env.state_size,
                        presence=0)


@functools.cache
def _batched_functions(config: SMAXConfig) -> tuple[Any, Any, Any]:
    """The jaxmarl env, ``reset(keys)`` and ``step(key, states, start_keys, actions)`` over a
    batch of envs, jitted.

    Cached per config, so the training and evaluation envs of a run share the compiled
    functions (JAX compiles once per batch size; tracing SMAX's step takes seconds).
    Per-agent arrays come out agent-major (``(n_agents, n_envs, ...)``) so that each agent's
    slice is contiguous on the numpy side.
    """
    jax, jnp, _ = _import_smax()
    env = make_smax(config)
    agents = env.agents  # the allies; with enemy = "agents" the allies, then the enemies
    n_allies = env.num_allies
    versus = config.enemy == "agents"
    counts = action_counts(env, config)
    width = max(counts)
    mirror = Mirror.of(env, env.num_enemy_actions) if versus and config.mirror_enemy else None
    moves = None if mirror is None else jnp.asarray(mirror.moves)

    scale = jnp.asarray(state_scale(env)) if config.state_norm else None

    def units(state: Any) -> Any:
        """jaxmarl's unit arrays (HeuristicEnemySMAX wraps them with its enemy policy's state)."""
        return state if versus else state.state

    def mask(avail: dict[str, Any], i: int, agent: str) -> Any:
        """Agent ``i``'s mask, mirrored for an enemy where asked, zero-padded to the widest."""
        m = avail[agent]
        if mirror is not None and i >= n_allies:
            m = mirror.masks(m)
        return m if counts[i] == width else jnp.pad(m, (0, width - counts[i]))

    def observe(obs: dict[str, Any], state: Any) -> tuple[Any, Any, Any]:
        avail = env.get_avail_actions(state)
        world = obs["world_state"] if scale is None else obs["world_state"] * scale
        stacked = jnp.stack([obs[a] for a in agents])
        if mirror is not None:
            stacked = jnp.concatenate([stacked[:n_allies], mirror.obs(stacked[n_allies:])])
        return (stacked, world,
                jnp.stack([mask(avail, i, a) for i, a in enumerate(agents)]).astype(jnp.float32))

    def reset_one(key: Any) -> tuple[Any, ...]:
        obs, state = env.reset(key)
        return (state, *observe(obs, state))

    def step_one(key: Any, state: Any, start_key: Any, actions: Any) -> tuple[Any, ...]:
        step_key, reset_key = jax.random.split(key)
        if moves is not None:  # an enemy's move in its mirror is the other way in the world
            actions = jnp.concatenate([actions[:n_allies], moves[actions[n_allies:]]])
        obs, next_state, rewards, dones, _ = env.step_env(
            step_key, state, {a: actions[i] for i, a in enumerate(agents)})
        final_obs, final_world, final_avail = observe(obs, next_state)
        alive = units(next_state).unit_alive
        allies_dead = ~jnp.any(alive[:n_allies])
        enemies_dead = ~jnp.any(alive[n_allies:])
        ended = dones["__all__"]
        terminated = allies_dead | enemies_dead
        truncated = ended & ~terminated
        won = enemies_dead & ~allies_dead
        lost = allies_dead & ~enemies_dead
        new_state, new_obs, new_world, new_avail = reset_one(reset_key)

        def pick(new: Any, old: Any) -> Any:
            return jnp.where(ended, new, old)

        state_out = jax.tree.map(pick, new_state, next_state)
        return (
            state_out, pick(reset_key, start_key),
            pick(new_obs, final_obs), pick(new_world, final_world), pick(new_avail, final_avail),
            jnp.stack([rewards[a] for a in agents]).astype(jnp.float32), terminated, truncated,
            alive[:len(agents)], won, lost, final_obs, final_world, final_avail,
        )

    def reset_all(keys: Any) -> tuple[Any, ...]:
        states, obs, world, avail = jax.vmap(reset_one)(keys)
        return states, obs.swapaxes(0, 1), world, avail.swapaxes(0, 1)

    def step_all(key: Any, states: Any, start_keys: Any, actions: Any) -> tuple[Any, ...]:
        key, sub = jax.random.split(key)
        keys = jax.random.split(sub, actions.shape[0])
        out = jax.vmap(step_one)(keys, states, start_keys, actions)
        (states, start_keys, obs, world, avail, rewards, terminated, truncated, active, won, lost,
         final_obs, final_world, final_avail) = out
        return (key, states, start_keys, obs.swapaxes(0, 1), world, avail.swapaxes(0, 1), rewards,
                terminated, truncated, active, won, lost, final_obs.swapaxes(0, 1), final_world,
                final_avail.swapaxes(0, 1))

    return env, jax.jit(reset_all), jax.jit(step_all)


class SMAXVectorEnv:
    """``n_envs`` SMAX battles on one map, stepped as one jitted, vmapped JAX call."""

    def __init__(self, config: SMAXConfig, n_envs: int, seed: int = 0) -> None:
        jax, jnp, _ = _import_smax()
        self._jax, self._jnp = jax, jnp
        self.config = config
        env, self._reset_fn, self._step_fn = _batched_functions(config)
        self.n_envs = n_envs
        self.agent_names: list[str] = [str(name) for name in env.agents]
        self.n_agents: int = len(self.agent_names)
        self._n_allies: int = env.num_allies
        self.agent_groups: dict[str, list[str]] = {"ally": self.agent_names[:self._n_allies]}
        """jaxmarl's names (``ally_0`` ...); with the heuristic enemy only the allies play, with
        ``enemy = "agents"`` the ``enemy`` group (``enemy_0`` ...) follows them."""
        if config.enemy == "agents":
            self.agent_groups["enemy"] = self.agent_names[self._n_allies:]
        self.entity_layouts: list[EntityLayout] = entity_layouts(env, self.n_agents)
        """Each agent's observation cut into its entities (also on its space, for ``encoder = "entity"``)."""
        self.observation_spaces: list[spaces.Box] = [
            with_entity_layout(spaces.Box(-1.0, 1.0, (env.obs_size,), np.float32), layout)
            for layout in self.entity_layouts
        ]
        self._n_actions = action_counts(env, config)
        self.action_spaces: list[spaces.Space] = [spaces.Discrete(n) for n in self._n_actions]
        self._ragged = len(set(self._n_actions)) > 1
        """The two sides' action counts differ (5m_vs_6m with enemy = "agents"): masks come out of
        JAX padded to the widest and are cut back to each agent's own."""
        self.state_entity_layout = state_entity_layout(env)
        """The world state's units (the teams and type ids after them are left out: each unit's type
        bits and group say the same)."""
        self.state_space = with_entity_layout(spaces.Box(-np.inf, np.inf, (env.state_size,), np.float32),
                                              self.state_entity_layout)
        self._seed = seed
        self._key = jax.random.PRNGKey(seed)
        self._reset_before = False
        self._states: Any = None
        self._start_keys: Any = None
        self._returns = np.zeros(n_envs)
        self._enemy_returns = np.zeros(n_envs)
        self._lengths = np.zeros(n_envs, dtype=np.int64)

    # ------------------------------------------------------------------ resets and seeds

    def _begin(self, start_keys: Any) -> Reset:
        """Start every env's episode from its reset key."""
        self._reset_before = True
        self._start_keys = self._jnp.asarray(start_keys, dtype=self._jnp.uint32)
        self._states, obs, world, avail = self._reset_fn(self._start_keys)
        self._returns[:] = 0.0
        self._enemy_returns[:] = 0.0
        self._lengths[:] = 0
        obs_np, avail_np = np.array(obs), np.array(avail)
        return list(obs_np), np.array(world), self._masks(avail_np)

    def _masks(self, avail: np.ndarray) -> list[np.ndarray]:
        """Each agent's masks ``(n_envs, n_actions)`` from the stacked, padded ones."""
        if not self._ragged:
            return list(avail)
        return [a[:, :n] for a, n in zip(avail, self._n_actions)]

    def reset(self, seed: int | None = None) -> Reset:
        """Reset every env; a seed re-seeds the key stream (the constructor's seed on the first call)."""
        if seed is None and not self._reset_before:
            seed = self._seed
        if seed is not None:
            self._key = self._jax.random.PRNGKey(seed)
        self._key, sub = self._jax.random.split(self._key)
        return self._begin(self._jax.random.split(sub, self.n_envs))

    def episode_starts(self) -> list[dict[str, Any]]:
        """Each env's reset key (its episode's start) and, in env 0's entry, the key stream now.

        ``restart`` rebuilds the same starting states from these and continues the same
        stream, so a checkpoint taken when every env is at its first step resumes exactly.
        """
        keys = np.asarray(self._start_keys).tolist()
        stream = np.asarray(self._key).tolist()
        return [{"seed": None, "rng": {"reset_key": key, "stream": stream if k == 0 else None},
                 "steps": int(n)} for k, (key, n) in enumerate(zip(keys, self._lengths.tolist()))]

    def restart(self, starts: Sequence[dict[str, Any]]) -> Reset:
        """Begin each env's episode again from its saved reset key (see ``episode_starts``)."""
        if len(starts) != self.n_envs:
            raise ValueError(f"restart needs {self.n_envs} episode starts, got {len(starts)}")
        if starts[0]["rng"] is None:
            return self.reset(seed=self._seed)
        self._key = self._jnp.asarray(starts[0]["rng"]["stream"], dtype=self._jnp.uint32)
        return self._begin([start["rng"]["reset_key"] for start in starts])

    def get_rng_state(self) -> list[Any]:
        """One key stream drives every env: it is entry 0."""
        return [np.asarray(self._key).tolist()] + [None] * (self.n_envs - 1)

    def set_rng_state(self, states: Sequence[Any]) -> None:
        if len(states) != self.n_envs:
            raise ValueError(f"set_rng_state needs {self.n_envs} states, got {len(states)}")
        if states[0] is not None:
            self._key = self._jnp.asarray(states[0], dtype=self._jnp.uint32)
        self._reset_before = True

    # ------------------------------------------------------------------ stepping

    def step(self, actions: Sequence[Any]) -> VectorStep:
        """Step every env with its row of ``actions``; ended episodes are reset (inside the same call)."""
        if self._states is None:
            self.reset()
        batch = np.stack([np.asarray(a).reshape(self.n_envs) for a in actions], axis=1).astype(np.int32)
        out = self._step_fn(self._key, self._states, self._start_keys, batch)
        self._key, self._states, self._start_keys = out[:3]
        (obs, world, avail, rewards, terminated, truncated, active, won, lost,
         final_obs, final_world, final_avail) = (np.array(x) for x in out[3:])
        allies = self._n_allies
        self._returns += rewards[:, :allies].mean(axis=1, dtype=np.float64)
        versus = allies < self.n_agents
        if versus:
            self._enemy_returns += rewards[:, allies:].mean(axis=1, dtype=np.float64)
        self._lengths += 1
        ended = np.flatnonzero(terminated | truncated)
        episode_infos: list[dict[str, Any]] = [
            {"return": float(self._returns[k]), "length": int(self._lengths[k]), "win": float(won[k])}
            for k in ended
        ]
        if versus:  # each side's return; the winning side's group ("" for a draw or a time-out)
            for info, k in zip(episode_infos, ended):
                info.update(return_ally=info["return"], return_enemy=float(self._enemy_returns[k]),
                            winner="ally" if won[k] else "enemy" if lost[k] else "")
            self._enemy_returns[ended] = 0.0
        self._returns[ended] = 0.0
        self._lengths[ended] = 0
        return VectorStep(
            obs=list(obs), state=world, avail=self._masks(avail), rewards=rewards, terminated=terminated,
            truncated=truncated, active=active, final_state=final_world, episode_infos=episode_infos,
            final_obs=list(final_obs), final_avail=self._masks(final_avail),
        )

    def close(self) -> None:
        """Nothing to release (the state is a set of JAX arrays)."""


def make_smax_vector_env(config: SMAXConfig, n_envs: int, seed: int = 0) -> SMAXVectorEnv:
    """One jitted SMAX batch of ``n_envs`` environments."""
    return SMAXVectorEnv(config, n_envs, seed)


register("env", SMAXConfig, make_smax_vector_env, vectorised=True)
