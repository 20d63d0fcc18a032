"""A replayed forward pass and update of Mava's own Sable (instadeepai/Mava 73c4611), kept as numbers.

Mava's ``SableNetwork`` (mava/networks/sable_network.py, retention.py, utils/sable/
discrete_trainer_executor.py) is built at a small size with Mava's network defaults otherwise
(decay_scaling_factor 0.8 for the memory variant, 1.0 for the ff one as ff_sable.py's
learner_setup leaves it; one head; no chunking unless the case says so), its parameters
initialised from a fixed key, and run on fixed inputs: the training call (values, log-probs,
entropy over a rollout with episode starts and a carried state), the acting call, and 1 and 10
steps of Mava's own minibatch update (the ``_update_minibatch`` function of
mava/systems/sable/anakin/{rec,ff}_sable.py, read out of the file and run as written: its PPO
loss with advantage normalisation and value clipping, the pmean over batch and device, and
Mava's optimiser ``optax.chain(clip_by_global_norm(0.5), adam(2.5e-4, eps=1e-5))``) on one
batch.  Mava's numbers (outputs, each step's losses, every weight at the start and after 1 and
10 steps, under harl's parameter names) go to ``tests/sable/data/mava_replay_<case>.json``
with the inputs that made them; ``tests/sable/test_mava_replay.py`` runs harl's network and
the loss on them without JAX and must agree to float32 rounding.

Run in a venv with jax, flax, optax, distrax, chex and omegaconf (``/work/mava-venv``)::

    /work/mava-venv/bin/python benchmarks/sable_mava_replay.py --mava-src /work/mava-src
    /work/mava-venv/bin/python benchmarks/sable_mava_replay.py --speed   # Mava's jitted update step vs harl's

``--mava-src`` holds ``mava/`` at 73c4611 (``git archive 73c4611 mava | tar -x``).  Mava itself
is not installed (its requirements pin git-only forks); only the network and the two system
files are read.  ``mava/__init__.py`` and ``mava/networks/__init__.py`` (which import every
network, env wrapper and logger) are skipped, and ``jumanji`` (used by ``mava/types.py`` and
``mava/systems/sable/types.py`` for type annotations only) is a stub module.

Mava 73c4611 as-is and as replayed.  73c4611 is a work-in-progress commit; four of its lines
do not compute what its own design (and the Mava that followed) says, so the replay's reference
runs Mava's source with each of these one-line changes made to the text before it is compiled
(``PATCHES`` below; each target must be found as often as listed), and the JSON keeps what the unchanged code
gives too (``mava_as_is``):

1. retention.py:264 and :292 write every head's output into ``[head_size:head_size+1]`` of a
   head_size-wide array, a slice JAX drops: as-is the retention output is all zeros.  Patched:
   head h fills ``[h*head_size:(h+1)*head_size]`` (with one head, the whole array).
2. discrete_trainer_executor.py:307-313 hands every agent the timestep's starting decoder state
   when acting; the causal training form (and harl) carry it agent to agent.  Patched: the
   state returned for agent i is the one agent i+1 reads.
3. retention.py:71 (ff variant) replaces the decay matrix with ones, dropping the decoder's
   causal mask: as-is an agent's training logits read the shifted action of the next agent,
   i.e. its own action.  Patched: the decoder keeps the lower triangle.
4. the loss (rec_sable.py:209, ff_sable.py:194) unpacks ``log_prob, value, entropy = sable_apply_fn(...)`` but the
   network returns ``(values, log_probs, entropy)``: as-is the ratio is taken of values and the
   value loss of log-probs.  Patched: ``value, log_prob, entropy = ...``.

Measured here (2026-12-07, the shared 2-core CPU, one thread a side; provisional):

* the replay: harl's network and update give Mava's numbers to float32 rounding, the largest
  differences over every output and weight: forward 3.6e-7, acting 3.1e-7, losses 3.6e-7,
  weights 1.2e-7 after 1 step and 2.4e-7 after 10 (``--compare``);
* ``--speed`` (Mava's rec_sable defaults, obs 30, 5 actions, a minibatch of 8 envs): harl's
  update step 144 / 252 / 575 ms at 32 / 64 / 128 timesteps (load 5.4); Mava's jitted step 173 ms
  at 32 (load ~6), 1,953 ms at 64 (load ~5) and 75,642 ms at 128 (load 10-15; compiling 198 s):
  harl / Mava time 0.8, 0.13 and about 0.01.  Mava's step grows far faster than its
  ``jax.grad`` of the training call alone (125 ms at 32, 280 ms at 64 timesteps); the cause
  (XLA on the timestep masks 73c4611 builds in Python loops, under the vmapped update) is not
  pinned down.  Acting, one timestep of 16 envs: Mava 9.0 ms, harl 32.9 ms (harl / Mava 3.7,
  load 10-15): harl's decoder steps agent by agent in eager torch.

Mava 73c4611 cannot express more than one head (its W_G is (E, head_size), W_O (head_size, E), and the
joined output is head_size wide), so the replay uses one head, Mava's default.  Mava's Dense,
RMSNorm, GroupNorm and SwiGLU initialisers give constant leaves (zero SwiGLU weights and biases,
unit scales); these are moved by 0.2 N(0, 1) from a fixed key after Mava's init so that a wrong
mapping of any leaf shows.
"""

from __future__ import annotations

import argparse
import ast
import base64
import json
import os
import sys
import textwrap
import time
import types
import zlib
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "sable" / "data"
MAVA_COMMIT = "73c461114"

N_AGENTS, OBS_DIM, N_ACTIONS, EMBED, N_HEAD = 3, 6, 4, 16, 1

# One-line changes to Mava's source for the reference run (see the module docstring).
PATCHES: dict[str, list[tuple[str, str, int]]] = {  # file: (old text, new text, times it occurs)
    "mava/networks/retention.py": [
        ("ret_output = ret_output.at[:, :, self.head_size : (self.head_size + 1)].set(y)",
         "ret_output = ret_output.at[:, :, head * self.head_size : (head + 1) * self.head_size].set(y)", 2),
        ("            decay_matrix = jnp.ones_like(decay_matrix)\n",
         "            decay_matrix = jnp.ones_like(decay_matrix)\n"
         "            if not self.full_self_retention:\n"
         "                decay_matrix = jnp.tril(decay_matrix)\n", 1),
    ],
    "mava/networks/utils/sable/discrete_trainer_executor.py": [
        ("        logit, updated_hstates = decoder.recurrent(\n", "        logit, hstates = decoder.recurrent(\n", 1),
        ("    return output_action.astype(jnp.int32), output_action_log, updated_hstates",
         "    return output_action.astype(jnp.int32), output_action_log, hstates", 1),
    ],
    "loss": [
        ("log_prob, value, entropy = sable_apply_fn(", "value, log_prob, entropy = sable_apply_fn(", 1),
    ],
}


# -- loading Mava's modules by path ------------------------------------------------------------

def _package(name: str, path: Path) -> None:
    """An empty package at ``path`` (its __init__ not run)."""
    mod = types.ModuleType(name)
    mod.__path__ = [str(path)]
    sys.modules[name] = mod


class _Anything(types.ModuleType):
    """A stub module whose every attribute is a class (jumanji names used in annotations)."""

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return type(name, (), {})


def patch(text: str, key: str) -> str:
    """``text`` with PATCHES[key] made, each target found exactly as often as listed."""
    for old, new, count in PATCHES.get(key, []):
        assert text.count(old) == count, f"{key}: {old!r} found {text.count(old)} times, expected {count}"
        text = text.replace(old, new)
    return text


def _load(name: str, path: Path, patched: bool) -> types.ModuleType:
    """Compile ``path`` as module ``name``, with PATCHES applied when ``patched``."""
    source = path.read_text(encoding="utf-8")
    if patched:
        source = patch(source, name.replace(".", "/") + ".py")
    mod = types.ModuleType(name)
    mod.__file__ = str(path)
    sys.modules[name] = mod
    exec(compile(source, str(path), "exec"), mod.__dict__)  # noqa: S102 - Mava's own source, by path
    return mod


def load_mava(src: Path, patched: bool) -> dict[str, Any]:
    """Mava's network modules (as-is, or with PATCHES) and its types, loaded from ``src/mava``."""
    base = src / "mava"
    for name in ("jumanji", "jumanji.types", "jumanji.specs", "jumanji.env"):
        sys.modules.setdefault(name, _Anything(name))
    for name, sub in (("mava", ""), ("mava.networks", "networks"), ("mava.networks.utils", "networks/utils"),
                      ("mava.networks.utils.sable", "networks/utils/sable"), ("mava.utils", "utils"),
                      ("mava.systems", "systems"), ("mava.systems.sable", "systems/sable")):
        _package(name, base / sub)
    mods: dict[str, Any] = {}
    mods["types"] = _load("mava.types", base / "types.py", False)
    mods["sable_types"] = _load("mava.systems.sable.types", base / "systems/sable/types.py", False)
    mods["sable_utils"] = _load("mava.utils.sable_utils", base / "utils/sable_utils.py", False)
    mods["retention"] = _load("mava.networks.retention", base / "networks/retention.py", patched)
    mods["executor"] = _load("mava.networks.utils.sable.discrete_trainer_executor",
                             base / "networks/utils/sable/discrete_trainer_executor.py", patched)
    mods["network"] = _load("mava.networks.sable_network", base / "networks/sable_network.py", patched)
    return mods


def update_minibatch_fn(src: Path, variant: str, patched: bool, namespace: dict[str, Any]) -> Any:
    """Mava's ``_update_minibatch`` (with its ``_loss_fn``) from {variant}_sable.py, compiled in
    ``namespace`` (which supplies config, sable_apply_fn and update_fn as learner_setup does)."""
    path = src / "mava" / "systems" / "sable" / "anakin" / f"{variant}_sable.py"
    source = path.read_text(encoding="utf-8")
    found = [n for n in ast.walk(ast.parse(source))
             if isinstance(n, ast.FunctionDef) and n.name == "_update_minibatch"]
    assert len(found) == 1, path
    text = textwrap.dedent(ast.get_source_segment(source, found[0]) or "")
    if patched:
        text = patch(text, "loss")
    exec(compile(text, f"{path}:_update_minibatch", "exec"), namespace)  # noqa: S102
    return namespace["_update_minibatch"]


# -- arrays in JSON ---------------------------------------------------------------------------

def pack(a: Any) -> dict[str, Any]:
    """An array as dtype, shape and its little-endian bytes, zlib-compressed, in base64."""
    a = np.asarray(a)
    dtype = {"f": "<f4", "i": "<i4", "u": "<i4", "b": "|u1"}[a.dtype.kind]
    raw = zlib.compress(np.ascontiguousarray(a.astype(dtype)).tobytes(), 9)
    return {"dtype": dtype, "shape": list(a.shape), "zlib_b64": base64.b64encode(raw).decode("ascii")}


def unpack(d: dict[str, Any]) -> np.ndarray:
    raw = zlib.decompress(base64.b64decode(d["zlib_b64"]))
    return np.frombuffer(raw, dtype=d["dtype"]).reshape(d["shape"]).copy()


# -- Mava's parameters under harl's names -----------------------------------------------------

def harl_names(params: Any, n_block: int) -> dict[str, np.ndarray]:
    """Mava's flax tree -> harl SableNetwork state_dict names (Dense kernels transposed)."""
    p = params["params"]
    enc, dec = p["encoder"], p["decoder"]
    out: dict[str, np.ndarray] = {}

    def dense(prefix: str, d: Any) -> None:
        out[f"{prefix}.weight"] = np.asarray(d["kernel"]).T
        if "bias" in d:
            out[f"{prefix}.bias"] = np.asarray(d["bias"])

    def retention(prefix: str, r: Any) -> None:
        assert N_HEAD == 1
        head = r["retentions_0"]
        for ours, theirs in (("w_q", "W_Q"), ("w_k", "W_K"), ("w_v", "W_V")):
            out[f"{prefix}.{ours}"] = np.asarray(head[theirs])
        out[f"{prefix}.w_g"] = np.asarray(r["W_G"])
        out[f"{prefix}.w_o"] = np.asarray(r["W_O"])
        out[f"{prefix}.group_norm.weight"] = np.asarray(r["group_norm"]["scale"])
        out[f"{prefix}.group_norm.bias"] = np.asarray(r["group_norm"]["bias"])

    def swiglu(prefix: str, f: Any) -> None:
        out[f"{prefix}.w_linear"] = np.asarray(f["W_linear"])
        out[f"{prefix}.w_gate"] = np.asarray(f["W_gate"])
        out[f"{prefix}.w_output"] = np.asarray(f["W_output"])

    out["obs_encoder.0.weight"] = np.asarray(enc["obs_encoder"]["layers_0"]["scale"])
    dense("obs_encoder.1", enc["obs_encoder"]["layers_1"])
    out["enc_ln.weight"] = np.asarray(enc["ln"]["scale"])
    dense("value_head.0", enc["head"]["layers_0"])
    out["value_head.2.weight"] = np.asarray(enc["head"]["layers_2"]["scale"])
    dense("value_head.3", enc["head"]["layers_3"])
    for i in range(n_block):
        blk = enc[f"encoder_block_{i}"]
        out[f"enc_blocks.{i}.ln1.weight"] = np.asarray(blk["ln1"]["scale"])
        out[f"enc_blocks.{i}.ln2.weight"] = np.asarray(blk["ln2"]["scale"])
        retention(f"enc_blocks.{i}.retn", blk["retn"])
        swiglu(f"enc_blocks.{i}.ffn", blk["ffn"])
    out["dec_ln.weight"] = np.asarray(dec["ln"]["scale"])
    dense("action_encoder", dec["action_encoder"]["layers_0"])
    dense("action_head.0", dec["head"]["layers_0"])
    out["action_head.2.weight"] = np.asarray(dec["head"]["layers_2"]["scale"])
    dense("action_head.3", dec["head"]["layers_3"])
    for i in range(n_block):
        blk = dec[f"decoder_block_{i}"]
        for ln in ("ln1", "ln2", "ln3"):
            out[f"dec_blocks.{i}.{ln}.weight"] = np.asarray(blk[ln]["scale"])
        retention(f"dec_blocks.{i}.retn1", blk["retn1"])
        retention(f"dec_blocks.{i}.retn2", blk["retn2"])
        swiglu(f"dec_blocks.{i}.ffn", blk["ffn"])
    n_leaves = len(__import__("jax").tree_util.tree_leaves(params))
    assert len(out) == n_leaves, (len(out), n_leaves)  # every Mava leaf mapped once
    return out


# -- the cases --------------------------------------------------------------------------------

CASES: dict[str, dict[str, Any]] = {
    # Memory Sable, parallel training form over a rollout of 6 timesteps, 2 blocks.
    "rec": {"variant": "rec", "n_block": 2, "batch": 4, "timesteps": 6, "chunk": None, "pos": False},
    # Memory Sable, chunkwise over 3 timesteps (an episode start mid-chunk), timestep encoding on.
    "rec_chunk_pos": {"variant": "rec", "n_block": 1, "batch": 4, "timesteps": 6, "chunk": 3, "pos": True},
    # Non-memory Sable: each row one timestep of the agents, no state.
    "ff": {"variant": "ff", "n_block": 2, "batch": 12, "timesteps": 1, "chunk": None, "pos": False},
}


def net_config(case: dict[str, Any]) -> Any:
    from omegaconf import OmegaConf
    if case["variant"] == "ff":
        return OmegaConf.create({"type": "ff_sable", "use_chunkwise": False, "agents_chunk_size": N_AGENTS})
    return OmegaConf.create({"type": "rec_sable", "timestep_positional_encoding": case["pos"],
                             "use_chunkwise": case["chunk"] is not None,
                             "timestep_chunk_size": case["chunk"] or 32})


def system_config(src: Path, variant: str) -> Any:
    """Mava's system defaults from configs/system/sable/{variant}_sable.yaml."""
    from omegaconf import OmegaConf
    system = OmegaConf.load(src / "mava" / "configs" / "system" / "sable" / f"{variant}_sable.yaml")
    return OmegaConf.create({"system": system})


def make_inputs(name: str, case: dict[str, Any], seed: int) -> dict[str, np.ndarray]:
    """Fixed inputs: observations, legal actions (some illegal), taken actions (legal), episode
    starts (mid-rollout, at t=0, never, twice), step counts, carried states; and an acting step."""
    rng = np.random.default_rng(seed)
    b, t, n, hs = case["batch"], case["timesteps"], N_AGENTS, EMBED // N_HEAD
    legal = rng.random((b, t, n, N_ACTIONS)) > 0.3
    legal[..., 1] = True
    actions = np.zeros((b, t, n), dtype=np.int32)
    for idx in np.ndindex(b, t, n):
        actions[idx] = rng.choice(np.flatnonzero(legal[idx]))
    starts = np.zeros((b, t), dtype=bool)
    if case["variant"] == "rec":
        starts[0, 2] = starts[1, 0] = starts[3, 1] = starts[3, 4] = True
    step_count = np.zeros((b, t, n), dtype=np.int32)
    for i in range(b):
        k = int(rng.integers(3, 40))
        for j in range(t):
            k = 0 if starts[i, j] else k + 1
            step_count[i, j] = k
    carried = case["variant"] == "rec"
    hidden = [(0.3 * rng.standard_normal((b, N_HEAD, case["n_block"], hs, hs)) * carried).astype(np.float32)
              for _ in range(3)]
    act_legal = rng.random((b, n, N_ACTIONS)) > 0.3
    act_legal[..., 2] = True
    return {
        "obs": rng.standard_normal((b, t, n, OBS_DIM)).astype(np.float32),
        "actions": actions, "legal": legal, "starts": starts, "step_count": step_count,
        "hidden_encoder": hidden[0], "hidden_decoder_self": hidden[1], "hidden_decoder_cross": hidden[2],
        "act_obs": rng.standard_normal((b, n, OBS_DIM)).astype(np.float32),
        "act_legal": act_legal,
        "act_starts": (np.arange(b) % 2 == 1) if carried else np.ones(b, dtype=bool),
        "act_step_count": rng.integers(0, 30, (b, n)).astype(np.int32),
        "noise": rng.standard_normal((4, b, t, n)).astype(np.float32),
    }


class MavaSide:
    """Mava's network for one case, as-is or patched, and the calls the replay makes."""

    def __init__(self, src: Path, case: dict[str, Any], patched: bool) -> None:
        import jax.numpy as jnp
        self.mods = load_mava(src, patched)
        self.case, self.patched = case, patched
        kwargs = {} if case["variant"] == "ff" else {"decay_scaling_factor": 0.8}  # as each learner_setup
        self.net = self.mods["network"].SableNetwork(
            n_block=case["n_block"], embed_dim=EMBED, n_head=N_HEAD, n_agents=N_AGENTS, action_dim=N_ACTIONS,
            net_config=net_config(case), action_space_type="discrete", **kwargs)
        self.jnp = jnp
        self.Observation = self.mods["types"].Observation
        self.HiddenStates = self.mods["sable_types"].HiddenStates
        self.Transition = self.mods["sable_types"].Transition

    def hidden(self, x: dict[str, np.ndarray], rows: np.ndarray | None = None) -> Any:
        jnp = self.jnp
        enc, d1, d2 = (jnp.asarray(x[k]) for k in ("hidden_encoder", "hidden_decoder_self", "hidden_decoder_cross"))
        if rows is not None:  # rec_sable zeroes the states of envs whose episode ended (rec_sable.py:113-116)
            keep = jnp.asarray(~rows)[:, None, None, None, None]
            enc, d1, d2 = enc * keep, d1 * keep, d2 * keep
        return self.HiddenStates(encoder_hstate=enc, decoder_hstate=(d1, d2))

    def init(self, key_seed: int) -> Any:
        import jax
        jnp = self.jnp
        b = 1
        obs = self.Observation(agents_view=jnp.zeros((b, N_AGENTS, OBS_DIM)),
                               action_mask=jnp.ones((b, N_AGENTS, N_ACTIONS), dtype=bool),
                               step_count=jnp.zeros((b, N_AGENTS), dtype=jnp.int32))
        shape = (b, N_HEAD, self.case["n_block"], EMBED // N_HEAD, EMBED // N_HEAD)
        hs = self.HiddenStates(encoder_hstate=jnp.zeros(shape), decoder_hstate=(jnp.zeros(shape), jnp.zeros(shape)))
        key = jax.random.PRNGKey(key_seed)
        params = self.net.init(key, obs, hs, key, method="init_net")
        # Move every constant-initialised leaf so that a wrong mapping of it shows.
        leaves, tree = jax.tree_util.tree_flatten(params)
        keys = jax.random.split(jax.random.PRNGKey(key_seed + 1), len(leaves))
        moved = [leaf + 0.2 * jax.random.normal(k, leaf.shape) if bool(jnp.all(leaf == leaf.reshape(-1)[0])) else leaf
                 for leaf, k in zip(leaves, keys)]
        return jax.tree_util.tree_unflatten(tree, moved)

    def train_inputs(self, x: dict[str, np.ndarray]) -> tuple[Any, Any, Any, Any]:
        """(obs_carry, action, hstates, dones) as the loss hands them to the network."""
        jnp = self.jnp
        b, t, n = x["actions"].shape
        if self.case["variant"] == "ff":  # rows of one timestep, dummy zero states (ff_sable.py:428-442)
            obs = self.Observation(agents_view=jnp.asarray(x["obs"][:, 0]), action_mask=jnp.asarray(x["legal"][:, 0]),
                                   step_count=jnp.asarray(x["step_count"][:, 0]))
            dones = jnp.asarray(np.repeat(x["starts"], n, axis=1))
            return obs, jnp.asarray(x["actions"][:, 0]), self.hidden(x), dones
        obs = self.Observation(agents_view=jnp.asarray(x["obs"].reshape(b, t * n, OBS_DIM)),
                               action_mask=jnp.asarray(x["legal"].reshape(b, t * n, N_ACTIONS)),
                               step_count=jnp.asarray(x["step_count"].reshape(b, t * n)))
        # rec_sable's Transition.done is last_timestep.last(): the episode-start flag of each token
        dones = jnp.asarray(np.repeat(x["starts"], n, axis=1))
        return obs, jnp.asarray(x["actions"].reshape(b, t * n)), self.hidden(x), dones

    def train(self, params: Any, x: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        obs, action, hs, dones = self.train_inputs(x)
        v, logp, ent = self.net.apply(params, obs, action, hs, dones)
        shape = x["actions"].shape
        return {"values": np.asarray(v).reshape(shape), "log_probs": np.asarray(logp).reshape(shape),
                "entropy": np.asarray(ent).reshape(shape)}

    def act(self, params: Any, x: dict[str, np.ndarray], key_seed: int) -> dict[str, np.ndarray]:
        import jax
        jnp = self.jnp
        obs = self.Observation(agents_view=jnp.asarray(x["act_obs"]), action_mask=jnp.asarray(x["act_legal"]),
                               step_count=jnp.asarray(x["act_step_count"]))
        hs = self.hidden(x, x["act_starts"])
        if self.case["variant"] == "ff":
            hs = jax.tree_util.tree_map(jnp.zeros_like, hs)
        actions, logp, v, new_hs = self.net.apply(params, obs, hs, jax.random.PRNGKey(key_seed), method="get_actions")
        return {"actions": np.asarray(actions)[..., 0], "log_probs": np.asarray(logp)[..., 0],
                "values": np.asarray(v)[..., 0], "hidden_encoder": np.asarray(new_hs.encoder_hstate),
                "hidden_decoder_self": np.asarray(new_hs.decoder_hstate[0]),
                "hidden_decoder_cross": np.asarray(new_hs.decoder_hstate[1])}

    def updater(self, src: Path) -> Any:
        """Mava's minibatch update as its learner builds it, jitted, inside a batch and a device
        axis of size one (its pmeans)."""
        import chex
        import jax
        import optax
        from flax.core.frozen_dict import FrozenDict
        variant = self.case["variant"]
        config = system_config(src, variant)
        update_fn = optax.chain(optax.clip_by_global_norm(config.system.max_grad_norm),
                                optax.adam(config.system.actor_lr, eps=1e-5)).update  # {ff,rec}_sable.py learner_setup
        if variant == "ff":
            b = self.case["batch"]
            shape = (b, N_HEAD, self.case["n_block"], EMBED // N_HEAD, EMBED // N_HEAD)
            dummy = self.HiddenStates(encoder_hstate=self.jnp.zeros(shape),
                                      decoder_hstate=(self.jnp.zeros(shape), self.jnp.zeros(shape)))
            apply_fn = partial(self.net.apply, hstates=dummy)
        else:
            apply_fn = self.net.apply
        namespace = {"jax": jax, "jnp": self.jnp, "optax": optax, "chex": chex, "Params": FrozenDict,
                     "Transition": self.Transition, "HiddenStates": self.HiddenStates, "Tuple": tuple,
                     "config": config, "sable_apply_fn": apply_fn, "update_fn": update_fn}
        upd = update_minibatch_fn(src, variant, self.patched, namespace)

        def step(params: Any, opt_state: Any, batch_info: Any) -> Any:
            inner = jax.vmap(jax.vmap(lambda p, o, bi: upd((p, o), bi), axis_name="batch"), axis_name="device")
            lift = partial(jax.tree_util.tree_map, lambda a: a[None, None])
            (p, o), info = inner(lift(params), lift(opt_state), lift(batch_info))
            return jax.tree_util.tree_map(lambda a: a[0, 0], (p, o, info))

        opt = optax.chain(optax.clip_by_global_norm(config.system.max_grad_norm),
                          optax.adam(config.system.actor_lr, eps=1e-5))
        return jax.jit(step), opt.init, config

    def batch_info(self, x: dict[str, np.ndarray], old: dict[str, np.ndarray]) -> Any:
        jnp = self.jnp
        obs, action, hs, dones = self.train_inputs(x)
        shape = action.shape
        flat = {k: jnp.asarray(old[k].reshape(shape)) for k in ("old_log_probs", "old_values", "advantages", "targets")}
        traj = self.Transition(done=dones, action=action, value=flat["old_values"], reward=jnp.zeros(shape),
                               log_prob=flat["old_log_probs"], obs=obs, info={})
        if self.case["variant"] == "ff":
            return traj, flat["advantages"], flat["targets"]
        return traj, flat["advantages"], flat["targets"], hs


def rollout_stats(out: dict[str, np.ndarray], x: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Old log-probs and values near the current ones (ratios and value changes beyond the 0.2
    clip both ways), advantages and targets: fixed from the inputs' noise."""
    noise = x["noise"]
    old_v = out["values"] + 0.3 * noise[1]
    adv = 0.5 + noise[2]  # a mean away from zero, so the normalisation shows
    return {"old_log_probs": (out["log_probs"] + 0.25 * noise[0]).astype(np.float32),
            "old_values": old_v.astype(np.float32), "advantages": adv.astype(np.float32),
            "targets": (old_v + adv + 0.2 * noise[3]).astype(np.float32)}


def run_case(src: Path, name: str, seed: int) -> dict[str, Any]:
    case = CASES[name]
    x = make_inputs(name, case, seed)
    fixed, as_is = MavaSide(src, case, True), MavaSide(src, case, False)
    params = fixed.init(seed)
    record: dict[str, Any] = {
        "case": name, "settings": {**case, "n_agents": N_AGENTS, "obs_dim": OBS_DIM, "action_dim": N_ACTIONS,
                                   "embed_dim": EMBED, "n_head": N_HEAD,
                                   "decay_scaling_factor": 1.0 if case["variant"] == "ff" else 0.8},
        "seed": seed, "mava_commit": MAVA_COMMIT,
        "inputs": {k: pack(v) for k, v in x.items()},
    }
    train = fixed.train(params, x)
    old = rollout_stats(train, x)
    record["rollout"] = {k: pack(v) for k, v in old.items()}
    record["mava"] = {"train": {k: pack(v) for k, v in train.items()},
                      "act": {k: pack(v) for k, v in fixed.act(params, x, seed + 7).items()}}
    record["mava_as_is"] = {"train": {k: pack(v) for k, v in as_is.train(params, x).items()},
                            "act": {k: pack(v) for k, v in as_is.act(params, x, seed + 7).items()}}
    for k in ("hidden_encoder", "hidden_decoder_self", "hidden_decoder_cross"):  # as-is: kept small
        record["mava_as_is"]["act"].pop(k)
        if case["variant"] == "ff":  # ff_sable's acting drops the states it returns (ff_sable.py:92)
            record["mava"]["act"].pop(k)
    init = harl_names(params, case["n_block"])
    weights: dict[str, dict[str, np.ndarray]] = {}
    for label, side in (("mava", fixed), ("mava_as_is", as_is)):
        step, opt_init, config = side.updater(src)
        bi = side.batch_info(x, old)
        p, o = params, opt_init(params)
        losses = []
        for k in range(10):
            p, o, info = step(p, o, bi)
            losses.append({key: float(v) for key, v in info.items()})
            if k in (0, 9):
                weights[f"{label}_step{k + 1}"] = harl_names(p, case["n_block"])
        record[label]["losses"] = losses
    record["system"] = {k: float(config.system[k]) for k in ("actor_lr", "clip_eps", "ent_coef", "vf_coef", "max_grad_norm")}
    record["system"]["adam_eps"] = 1e-5
    record["weights_init"] = {k: pack(v) for k, v in init.items()}
    for label in ("mava", "mava_as_is"):
        for k in (1, 10):
            after = weights[f"{label}_step{k}"]
            record[label][f"step{k}"] = {"fingerprint": fingerprint(after, init),
                                         "selected": {n: pack(after[n]) for n in SELECTED if n in after}}
    record["_full_weights"] = weights  # not written: for --compare
    return record


SELECTED = ("enc_blocks.0.retn.w_q", "dec_blocks.0.retn2.w_o", "dec_blocks.0.ffn.w_gate", "action_head.3.weight",
            "value_head.3.weight", "obs_encoder.1.weight")


def fingerprint(after: dict[str, np.ndarray], before: dict[str, np.ndarray]) -> dict[str, list[float]]:
    """Per tensor: the sum of the changes, the sum of their absolute values and the largest one."""
    out = {}
    for k in sorted(after):
        d = after[k].astype(np.float64) - before[k].astype(np.float64)
        out[k] = [float(d.sum()), float(np.abs(d).sum()), float(np.abs(d).max())]
    return out


def compare(record: dict[str, Any]) -> None:
    """harl's side (tests/sable/test_mava_replay.py's HarlUpdate) on the record: the largest
    differences from Mava's numbers, over every output and every weight."""
    sys.path.insert(0, str(ROOT))
    sys.path.insert(0, str(ROOT / "tests" / "sable"))
    import torch
    from test_mava_replay import HarlUpdate, harl_act
    torch.set_num_threads(1)
    x = {k: unpack(v) for k, v in record["inputs"].items()}
    old = {k: unpack(v) for k, v in record["rollout"].items()}
    init = {k: unpack(v) for k, v in record["weights_init"].items()}
    ours = HarlUpdate(record["settings"], record["system"], init, x, old)
    with torch.no_grad():
        ev = ours.evaluate()
    got = {"values": ev.values, "log_probs": ev.log_probs, "entropy": ev.entropy}
    train = max(float(np.abs(got[k].numpy() - unpack(v)).max()) for k, v in record["mava"]["train"].items())
    act = harl_act(record["settings"], init, x, unpack(record["mava"]["act"]["actions"]))
    act_d = max(float(np.abs(act[k] - unpack(v)).max()) for k, v in record["mava"]["act"].items() if k != "actions")
    line = [f"forward {train:.2e}", f"act {act_d:.2e}"]
    for k in range(1, 11):
        loss = ours.step()
        mava_loss = record["mava"]["losses"][k - 1]
        dl = max(abs(loss[n] - mava_loss[n]) for n in loss)
        if k in (1, 10):
            full = record["_full_weights"][f"mava_step{k}"]
            state = ours.net.state_dict()
            dw = max(float(np.abs(state[n].numpy() - full[n]).max()) for n in full)
            line.append(f"step {k}: loss {dl:.2e} weights {dw:.2e}")
    print(f"  {record['case']}: max abs diff harl - Mava: " + "; ".join(line))


# -- speed ------------------------------------------------------------------------------------

def load() -> str:
    return Path("/proc/loadavg").read_text().split()[0] if Path("/proc/loadavg").exists() else "?"


def speed(src: Path, repeats: int, num_envs: int, rollout: int, obs_dim: int, n_actions: int) -> None:
    """Mava's jitted minibatch update and acting step vs harl's, at Mava's rec_sable defaults
    (embed 64, 1 head, 1 block, 16 envs, rollout 128, 2 minibatches: a minibatch of 8 envs x 128
    timesteps x 3 agents; acting: one timestep of the 16 envs), one CPU thread each, the two
    sides timed in alternation so that a change of load falls on both."""
    import jax
    import torch
    sys.path.insert(0, str(ROOT))
    sys.path.insert(0, str(ROOT / "tests" / "sable"))
    from test_mava_replay import HarlUpdate  # harl's side of the replay, as the test runs it

    from harl.nets.sable.network import SableHidden, SableNetwork

    # Mava's update at 128 timesteps takes minutes to compile (its masks are Python loops over
    # the timesteps): keep the compiled program for the next run.
    jax.config.update("jax_compilation_cache_dir", os.environ.get("SABLE_JAX_CACHE", "/tmp/sable-jax-cache"))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 1.0)

    global EMBED, OBS_DIM, N_ACTIONS
    EMBED, OBS_DIM, N_ACTIONS = 64, obs_dim, n_actions
    torch.set_num_threads(1)
    case = {"variant": "rec", "n_block": 1, "batch": num_envs // 2, "timesteps": rollout, "chunk": None, "pos": False}
    CASES["speed"] = case
    x = make_inputs("speed", case, 0)
    side = MavaSide(src, case, True)
    params = side.init(0)
    train = side.train(params, x)
    old = rollout_stats(train, x)
    step, opt_init, config = side.updater(src)
    bi = side.batch_info(x, old)
    o = opt_init(params)
    t0 = time.perf_counter()
    p, o, _ = step(params, o, bi)
    jax.block_until_ready(p)
    compile_s = time.perf_counter() - t0

    settings = {**case, "n_agents": N_AGENTS, "obs_dim": OBS_DIM, "action_dim": N_ACTIONS, "embed_dim": EMBED,
                "n_head": N_HEAD, "decay_scaling_factor": 0.8}
    system = {k: float(config.system[k]) for k in ("actor_lr", "clip_eps", "ent_coef", "vf_coef", "max_grad_norm")}
    system["adam_eps"] = 1e-5
    ours = HarlUpdate(settings, system, harl_names(params, 1), x, old, objective="harl")
    ours.step()

    # Acting: one timestep of num_envs envs (Mava's get_actions, jitted, as its rollout scan runs it).
    act_x = make_inputs("speed", {**case, "batch": num_envs, "timesteps": 6}, 1)  # its act_* part
    obs = side.Observation(agents_view=side.jnp.asarray(act_x["act_obs"]),
                           action_mask=side.jnp.asarray(act_x["act_legal"]),
                           step_count=side.jnp.asarray(act_x["act_step_count"]))
    hs = side.hidden(act_x)
    mava_act = jax.jit(partial(side.net.apply, method="get_actions"))
    key = jax.random.PRNGKey(0)
    jax.block_until_ready(mava_act(params, obs, hs, key))
    t_obs, t_legal = torch.from_numpy(act_x["act_obs"]), torch.from_numpy(act_x["act_legal"])
    t_hidden = SableHidden(*(torch.from_numpy(act_x[k]) for k in ("hidden_encoder", "hidden_decoder_self",
                                                                     "hidden_decoder_cross")))
    t_starts = torch.zeros(num_envs, dtype=torch.bool)
    gen = torch.Generator().manual_seed(0)

    def harl_act() -> None:
        with torch.no_grad():
            SableNetwork.act(ours.net, t_obs, t_hidden, t_starts, t_legal, generator=gen)  # the network's call

    harl_act()
    loads = [load()]
    times: dict[str, list[float]] = {k: [] for k in ("mava_update", "harl_update", "mava_act", "harl_act")}
    for _ in range(repeats):
        t0 = time.perf_counter()
        p, o, _ = step(p, o, bi)
        jax.block_until_ready(p)
        times["mava_update"].append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        ours.step()
        times["harl_update"].append(time.perf_counter() - t0)
        for _ in range(10):
            key, sub = jax.random.split(key)
            t0 = time.perf_counter()
            jax.block_until_ready(mava_act(params, obs, hs, sub))
            times["mava_act"].append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            harl_act()
            times["harl_act"].append(time.perf_counter() - t0)
    loads.append(load())
    ms = {k: 1e3 * float(np.median(v)) for k, v in times.items()}
    print(f"Sable, {N_AGENTS} agents, obs {OBS_DIM}, {N_ACTIONS} actions, embed {EMBED}, 1 head, 1 block; "
          f"Mava 73c4611 (jax {jax.__version__}, jitted, XLA CPU) vs harl (torch {torch.__version__}); one thread "
          f"each, medians of {repeats} (acting {10 * repeats}), sides alternated; load {loads[0]} -> {loads[1]}:")
    print(f"  minibatch update ({case['batch']} envs x {rollout} timesteps): Mava {ms['mava_update']:8.1f} ms, "
          f"harl {ms['harl_update']:8.1f} ms, harl/Mava {ms['harl_update'] / ms['mava_update']:.2f} "
          f"(Mava's first call, compiling: {compile_s:.0f} s)")
    print(f"  acting step ({num_envs} envs):                   Mava {ms['mava_act']:8.2f} ms, "
          f"harl {ms['harl_act']:8.2f} ms, harl/Mava {ms['harl_act'] / ms['mava_act']:.2f}")
    print("  provisional: a shared 2-core machine (other jobs running; load above)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mava-src", type=Path, default=Path(os.environ.get("MAVA_SRC", "/work/mava-src")))
    parser.add_argument("--cases", nargs="*", default=list(CASES))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=DATA)
    parser.add_argument("--speed", action="store_true", help="time Mava's and harl's update step instead")
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--rollout", type=int, default=128, help="--speed: timesteps per rollout (Mava's 128)")
    parser.add_argument("--compare", action="store_true",
                        help="also run harl's side (needs torch here) and print the largest differences")
    args = parser.parse_args()
    if not (args.mava_src / "mava" / "networks" / "sable_network.py").exists():
        print(f"no Mava source at {args.mava_src}: git archive {MAVA_COMMIT} mava | tar -x -C DIR, then --mava-src DIR")
        return
    if args.speed:
        os.environ.setdefault("XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false")
        speed(args.mava_src, args.repeats, 16, args.rollout, 30, 5)
        return
    import jax
    args.out.mkdir(parents=True, exist_ok=True)
    for name in args.cases:
        record = run_case(args.mava_src, name, args.seed)
        record["versions"] = {"jax": jax.__version__, "flax": __import__("flax").__version__,
                              "optax": __import__("optax").__version__, "distrax": __import__("distrax").__version__}
        path = args.out / f"mava_replay_{name}.json"
        full = record.pop("_full_weights")
        path.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
        losses = record["mava"]["losses"]
        print(f"{name}: wrote {path.relative_to(ROOT) if path.is_relative_to(ROOT) else path} "
              f"({path.stat().st_size // 1024} KiB); loss {losses[0]['total_loss']:.6f} -> {losses[-1]['total_loss']:.6f}; "
              f"as-is loss {record['mava_as_is']['losses'][0]['total_loss']:.6f}")
        if args.compare:
            compare({**record, "_full_weights": full})


if __name__ == "__main__":
    main()
