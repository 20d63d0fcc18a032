"""The compiled collection step: env step, the team's act and the buffer write as one graph.

``[collector] compile = "on"`` (or ``"auto"``, below) on a pipeline whose env is the torch MPE
(``[env] kind = "mpe_torch"``) runs each vector step of a rollout as one ``torch.compile``d
function with static shapes (``fullgraph=True, dynamic=False``)::

    for t in range(T):                              # the rollout (OnPolicyCollector.collect)
        ended = venv.plan_ends()                    # host: which episodes end now (no read-back)
        fresh = venv.fresh_starts(ended)            # eager: their new worlds, from the env's generator
        step(t_tensor, *fresh)                      # one graph: read slot t, sample actions and
                                                    # log-probs, V(s_t), the env step, the resets
                                                    # (torch.where), V(pre-reset state), write slot t

Two graphs are compiled: a step that ends no episode and one that ends some (resets, V of the
pre-reset state); the host knows which one each step is, since MPE episodes end only by time
limit.  The step index is a ``(1,)`` tensor (an int would recompile every step).

It equals the eager path to float rounding, sample for sample: the team's random draws run
inside the graph as eager's own kernels (``torch._inductor.config.fallback_random``), so both
consume the global generator alike, and the env's resets are drawn in eager from the env's
generator, as its ``step`` draws them (``tests/collect/test_compiled.py``).

On CPU the graph is compiled with inductor's C++ wrapper (``cpp_wrapper``: the Python wrapper
is slower than eager at this size); on CUDA it runs under CUDA graphs (``triton.cudagraphs``,
what ``mode="reduce-overhead"`` sets), with the buffer's and the env's tensors at static addresses.

Compiling costs seconds to a minute the first time; inductor's caches (``cache_dir``) keep the
compiled code for the next run.  ``compile = "auto"`` compiles once the run has spent as long
collecting eagerly as this step's last compile took (recorded in the cache folder; 60 s where
none is recorded): it never loses more than the compile time against either choice made in
advance, whatever the run's length (docs/performance.md, "The compiled collection step").
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from harl.collect.critic_input import critic_input, policy_values
from harl.errors import ConfigError
from harl.warm_calls import WarmCalls, call_kind

MODES = ("off", "on", "auto")
COLD_COMPILE_S = 60.0
"""``auto``'s estimate of a compile with nothing recorded for this step (docs/performance.md: a cold
compile of both graphs took 136-187 s at load 14-26 on 2 cores, a warm one 19-38 s)."""
_TIMES = "harl_compile_times.json"


def cache_dir() -> Path:
    """Where inductor keeps compiled code: ``TORCHINDUCTOR_CACHE_DIR`` where set, else
    ``$XDG_CACHE_HOME/harl/inductor`` (``~/.cache/harl/inductor``)."""
    given = os.environ.get("TORCHINDUCTOR_CACHE_DIR")
    if given:
        return Path(given)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "harl" / "inductor"


def use_cache_dir() -> Path:
    """Point inductor's caches (its FX graph cache included) at ``cache_dir()`` for this process."""
    folder = cache_dir()
    folder.mkdir(parents=True, exist_ok=True)
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = str(folder)
    import torch._inductor.config as inductor_config

    inductor_config.fx_graph_cache = True
    return folder


def recorded_compile_s(signature: str) -> float | None:
    """The seconds this step's last compile took (the cache folder's record), or None."""
    try:
        times = json.loads((cache_dir() / _TIMES).read_text())
    except (OSError, ValueError):
        return None
    value = times.get(signature) if isinstance(times, dict) else None
    return float(value) if isinstance(value, (int, float)) else None


def record_compile_s(signature: str, seconds: float) -> None:
    """Remember this compile's time for ``auto`` (best effort: a read-only cache folder is fine)."""
    path = cache_dir() / _TIMES
    try:
        times = json.loads(path.read_text()) if path.exists() else {}
        if not isinstance(times, dict):
            times = {}
        times[signature] = round(seconds, 3)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(times, indent=1, sort_keys=True))
        tmp.replace(path)
    except (OSError, ValueError):
        pass


def should_compile(mode: str, eager_collect_s: float, expected_compile_s: float) -> bool:
    """``auto``'s rule: compile once the eager collection so far took as long as the compile is
    expected to (a ski-rental rule: whatever the run's length, the cost is at most twice the
    better of compiling at once and never compiling, plus nothing when the run ends first)."""
    if mode == "on":
        return True
    if mode == "off":
        return False
    return eager_collect_s >= expected_compile_s


def compile_problem(env_kind: str, recurrent: bool, critic_recurrent: bool, backend: str) -> str | None:
    """Why ``compile = "on"`` cannot run on this pipeline (None: it can)."""
    if env_kind != "mpe_torch":
        return (f'the compiled collection step steps the torch MPE (env.kind = "mpe_torch"), but env.kind = '
                f'"{env_kind}"; set collector.compile = "off" (or "auto": eager where it cannot compile)')
    if recurrent or critic_recurrent:
        return ('the compiled collection step takes feed-forward actors and critics, but this pipeline\'s are '
                'recurrent; set collector.compile = "off" (or policy.recurrent = "none")')
    if backend != "inline":
        return (f'the compiled collection step steps the envs in this process, but collector.backend = '
                f'"{backend}"; remove collector.backend or set collector.compile = "off"')
    return None


def compilable(venv: Any) -> bool:
    """Whether ``venv`` gives the compiled step its parts (``harl.envs.mpe_torch``'s vector env)."""
    return all(hasattr(venv, name) for name in ("advance", "plan_ends", "fresh_starts", "begin_where"))


def signature(venv: Any, policy: Any, critic: Any, length: int) -> str:
    """What the compiled code depends on: torch, the device, the env, the shapes, the networks."""
    parts = [torch.__version__, str(getattr(venv, "device", "")), repr(getattr(venv, "config", "")),
             str(venv.n_envs), str(length), repr(policy), repr(critic)]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]


def announce(text: str | None) -> None:
    """Tell the open progress views what long step is under way (None: it is over)."""
    from harl.logging.progress import show_activity

    show_activity(text)


class CompiledCollection:
    """One rollout at a time through the compiled step (see the module docstring).

    ``policy`` samples (``OnPolicyActors.sample``), ``critic`` values (``value``, and ``reads``
    for an independent critic), ``venv`` is an ``MPETorchVectorEnv``, ``buffer`` the rollout
    buffer the graph writes (the same one every rollout: its tensors are the graph's inputs).
    """

    def __init__(self, venv: Any, policy: Any, critic: Any, buffer: Any,
                 compiler: Callable[..., Any] = torch.compile) -> None:
        """``compiler``: ``torch.compile``, or what stands for it (a test runs the graphs' Python as is)."""
        if getattr(policy, "hidden_size", 0) or getattr(critic, "hidden_size", 0):
            raise ConfigError(compile_problem("mpe_torch", True, True, "inline") or "")
        self.venv, self.policy, self.critic, self.buffer = venv, policy, critic, buffer
        self.device = torch.device(venv.device)
        self.compile_s = 0.0
        """Seconds spent in the first calls of the graphs (compiling, or loading them from the cache)."""
        self.signature = signature(venv, policy, critic, buffer.length)
        self._cuda = self.device.type == "cuda"
        options: dict[str, Any] = {"fallback_random": True}
        if self._cuda:
            options["triton.cudagraphs"] = True
            self._mark_static()
        else:
            options["cpp_wrapper"] = True
        use_cache_dir()
        # A call's kind: the networks' modes and grad mode (every argument's shape is fixed by the buffer and
        # the env, so none is looked at: harl.warm_calls).
        def kind(_args: tuple[Any, ...]) -> tuple[Any, ...]:
            return getattr(policy, "training", None), getattr(critic, "training", None), call_kind(())

        self._plain = WarmCalls(compiler(self._step, fullgraph=True, dynamic=False, options=options), kind)
        self._ending = WarmCalls(compiler(self._step_ending, fullgraph=True, dynamic=False, options=options), kind)
        self._first = {"plain": True, "ending": True}
        self._index = [torch.tensor([t], dtype=torch.int64, device=self.device) for t in range(buffer.length)]

    def _mark_static(self) -> None:
        """CUDA graphs replay fixed addresses: the buffer's and the env's tensors stay where they are."""
        b = self.buffer
        tensors = [*b.obs, *[a for a in b.avail if a is not None], *b.actions, *b.log_probs, b.state, b.active,
                   b.rewards, b.terminated, b.truncated, b.values, b.final_values, b.starts, *b.extras.values()]
        tensors += self.venv.tensors()
        for x in tensors:
            torch._dynamo.mark_static_address(x)

    # ------------------------------------------------------------------ the graphs

    def _act(self, t: torch.Tensor) -> tuple[Any, torch.Tensor]:
        """The team's sample and V(s_t) at slot ``t`` of the buffer (the policy's own values where it gives them)."""
        b = self.buffer
        obs = [o.index_select(0, t)[0] for o in b.obs]
        avail = [None if a is None else a.index_select(0, t)[0] for a in b.avail]
        state = b.state.index_select(0, t)[0]
        carried: dict[str, Any] = {"carried": {name: x.index_select(0, t)[0] for name, x in b.extras.items()},
                                   "starts": b.starts.index_select(0, t)[0]} if b.extras else {}
        sampled = self.policy.sample(obs, avail, **carried)
        values = policy_values(self.critic, sampled)
        return sampled, values if values is not None else self.critic.value(critic_input(self.critic, obs, state))

    def _write(self, t: torch.Tensor, sampled: Any, values: torch.Tensor, obs: list[torch.Tensor],
               state: torch.Tensor, rewards: torch.Tensor, truncated: torch.Tensor,
               final_values: torch.Tensor | None) -> None:
        """The record ``OnPolicyCollector.observe`` makes of the step, written at ``t``."""
        terminated = torch.zeros_like(truncated)
        ended = terminated | truncated
        active = torch.where(ended.unsqueeze(-1), 1.0, self.venv.active.float())
        avail = self.venv.avail
        self.buffer.write_fields(
            t, sampled.actions, sampled.log_probs, values, obs, None if avail is None else [*avail], state,
            rewards, terminated, truncated, active, ended.float(), final_values=final_values,
            extras=getattr(sampled, "extras", None))

    def _step(self, t: torch.Tensor) -> None:
        """A step that ends no episode."""
        sampled, values = self._act(t)
        obs, state, rewards, truncated = self.venv.advance(sampled.actions, check=False)
        self._write(t, sampled, values, obs, state, rewards, truncated, None)

    def _step_ending(self, t: torch.Tensor, mask: torch.Tensor, agent_pos: torch.Tensor,
                     landmark_pos: torch.Tensor, goals: torch.Tensor) -> torch.Tensor:
        """A step that ends the episodes in ``mask`` and begins the fresh worlds there; returns the
        ended episodes' returns (every env's return before the resets)."""
        sampled, values = self._act(t)
        obs, state, rewards, truncated = self.venv.advance(sampled.actions, check=False)
        final_values = self.critic.value(critic_input(self.critic, obs, state))
        returns = self.venv.final_returns()
        obs, state, _ = self.venv.begin_where(mask, agent_pos, landmark_pos, goals)
        self._write(t, sampled, values, obs, state, rewards, truncated, final_values)
        return returns

    # ------------------------------------------------------------------ the rollout

    def _call(self, kind: str, *args: torch.Tensor) -> Any:
        fn = self._plain if kind == "plain" else self._ending
        if self._cuda:
            torch.compiler.cudagraph_mark_step_begin()
        if not self._first[kind]:
            return fn(*args)
        announce("compiling the collection step")
        began = time.perf_counter()
        try:
            out = fn(*args)
        finally:
            announce(None)
        self._first[kind] = False
        self.compile_s += time.perf_counter() - began
        if not any(self._first.values()):
            record_compile_s(self.signature, self.compile_s)
        return out

    @torch.no_grad()
    def rollout(self) -> list[dict[str, Any]]:
        """Fill the buffer's ``T`` steps (its slot 0 already set: ``start`` or ``roll_over``); the
        episodes that ended, as the env's ``step`` reports them."""
        episodes: list[dict[str, Any]] = []
        limit = self.venv.config.max_episode_steps
        for t in range(self.buffer.length):
            ended = self.venv.plan_ends()
            if not len(ended):
                self._call("plain", self._index[t])
                continue
            fresh = self.venv.fresh_starts(ended)
            returns = self._call("ending", self._index[t], *fresh)
            chosen = returns[torch.as_tensor(ended, device=returns.device)].tolist()
            episodes.extend({"return": r, "length": limit} for r in chosen)
        self.buffer.written(self.buffer.length)
        return episodes

