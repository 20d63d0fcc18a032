"""``harl.load_policy``: a trained team acting in your own loop, with nothing but torch.

::

    team = harl.load_policy("exported/")           # a `harl export --format torchscript` folder
    hidden = team.initial_hidden(n_envs)           # None: every state starts empty
    actions, hidden = team.act(obs, avail, deterministic, hidden=hidden, starts=starts)

The acting contract of harl's own teams (``harl.evaluator.ActingPolicy``), with numpy actions
out (ready for an env) and anything array-like in: ``obs[i]`` one array per agent, ``(obs_dim,)``
or ``(B, obs_dim)``; ``starts`` ``(B,)`` 1 where a row begins an episode (its state restarts),
or pass ``hidden=None`` at an episode's start.

An export folder needs only torch (its files are TorchScript); a run directory is loaded
through harl's own stages, so it needs the run's env package too (to learn the spaces).
This module imports nothing of harl's training stack and no env package.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from harl.errors import HarlError, deprecated
from harl.rundir.files import MANIFEST

_NOT_GIVEN: Any = object()


class TeamActor:
    """The team's per-agent action functions (one tensor module each) and their manifest entries."""

    def __init__(self, modules: Sequence[Any], agents: Sequence[dict[str, Any]]) -> None:
        self.modules = list(modules)
        self.agents = list(agents)
        self.n_agents = len(self.modules)
        self.hidden_size = int(self.agents[0]["hidden_size"])

    def _inputs(self, i: int, obs: Any, avail: Any, state: Any, batch: int, starts: Any = None
                ) -> list[torch.Tensor]:
        spec = self.agents[i]
        names = [t["name"] for t in spec["inputs"]]
        inputs = [torch.as_tensor(np.asarray(obs, np.float32)).reshape(batch, -1)]
        if "avail" in names:
            width = spec["inputs"][names.index("avail")]["shape"][1]
            mask = np.ones((batch, width), np.float32) if avail is None else np.asarray(avail, np.float32)
            inputs.append(torch.as_tensor(mask).reshape(batch, width))
        # what an agent carries from step to step: its GRU state, and (agent Q networks with
        # last_action inputs) the (GRU state or None, action) pair
        hidden, last = state if isinstance(state, tuple) else (state, None)
        restart = None if starts is None else torch.as_tensor(np.asarray(starts)).reshape(batch) != 0
        if "hidden" in names:
            h = torch.zeros(batch, self.hidden_size) if hidden is None else hidden
            inputs.append(h if restart is None else h.masked_fill(restart.unsqueeze(-1), 0.0))
        if "last_action" in names:  # -1: none yet, at an episode's first step
            a = torch.full((batch,), -1, dtype=torch.long) if last is None else last
            inputs.append(a if restart is None else a.masked_fill(restart, -1))
        return inputs

    def initial_hidden(self, n_envs: int = 1, device: Any = None) -> None:
        """None: every agent's state starts empty (a zero GRU state, no previous action)."""
        return None

    @torch.no_grad()
    def act(self, obs: Sequence[Any], avail: Sequence[Any] | None = None, deterministic: Any = True,
            hidden: list[Any] | None = None, starts: Any = None, *, state: Any = _NOT_GIVEN
            ) -> tuple[list[np.ndarray], list[Any] | None]:
        """(one action per agent, the states to pass back as ``hidden`` next step, or None).

        ``obs[i]`` is agent ``i``'s observation, ``(obs_dim,)`` or a batch ``(B, obs_dim)``;
        ``avail[i]`` its action mask (None: every action allowed).  Actions come back in
        the same form (no batch axis for a single observation), ready for the env.
        ``hidden``: what the previous step returned (None: an episode's start); ``starts``
        ``(B,)`` (or a number for a single observation): 1 where a row begins an episode, whose
        state restarts.  The older ``act(obs, avail, state)`` and ``state=`` still work, with a
        ``HarlDeprecationWarning``.
        """
        if not isinstance(deterministic, (bool, np.bool_)):  # the older third argument: the state
            deprecated("TeamActor.act(obs, avail, state)", "act(obs, avail, deterministic, hidden=state)", 4)
            hidden, deterministic = deterministic, True
        if state is not _NOT_GIVEN:
            deprecated("TeamActor.act(state=)", "act(hidden=)", 4)
            hidden = state
        actions, states = [], []
        for i, module in enumerate(self.modules):
            single = np.ndim(obs[i]) == 1
            batch = 1 if single else int(np.shape(obs[i])[0])
            outputs = module(*self._inputs(i, obs[i], None if avail is None else avail[i],
                                           None if hidden is None else hidden[i], batch, starts))
            names = [t["name"] for t in self.agents[i]["outputs"]]
            action = outputs[0] if deterministic else self._sample(i, dict(zip(names, outputs)))
            hidden_out = outputs[names.index("hidden_out")] if "hidden_out" in names else None
            if any(t["name"] == "last_action" for t in self.agents[i]["inputs"]):
                states.append((hidden_out, action.reshape(batch).long()))
            elif hidden_out is not None:
                states.append(hidden_out)
            action = action.numpy()
            actions.append(action[0] if single else action)
        return actions, (states or None)

    def _sample(self, i: int, out: dict[str, torch.Tensor]) -> torch.Tensor:
        """A draw from agent ``i``'s action distribution, as harl's ``deterministic=False`` draws it."""
        spec = self.agents[i]
        kind, space = spec["distribution"], spec["action_space"]
        if not all(name in out for name in _PARAM_NAMES[kind]) or kind in ("deterministic", "q"):
            raise HarlError(
                f"agent {i}: deterministic=False needs the distribution's parameters, and this "
                f"{kind!r} policy has none in its export (a deterministic or Q actor has none; "
                "otherwise export again with --with-distribution)")
        if kind == "categorical":
            sizes = [space["n"]] if space["type"] == "Discrete" else list(space["nvec"])
            picks = []
            for part in out["logits"].split(sizes, -1):
                gumbel = -torch.empty_like(part).exponential_().log()
                picks.append((torch.log_softmax(part, -1) + gumbel).argmax(-1))
            action = torch.stack(picks, -1)
            return action[:, 0] if space["type"] == "Discrete" else action
        low = torch.tensor(space["low"], dtype=torch.float32)
        high = torch.tensor(space["high"], dtype=torch.float32)
        if kind == "gaussian":
            mean = out["mean"]
            draw = (mean + out["std"] * torch.randn_like(mean)).clamp(low, high)
        else:  # squashed_gaussian
            mu = out["mu"]
            draw = (high + low) / 2 + (high - low) / 2 * torch.tanh(mu + out["log_std"].exp() * torch.randn_like(mu))
        return draw.reshape(-1, *space["shape"])


class JointTeamActor:
    """A team that acts through one module (MAT, Sable: ``"joint"`` in the manifest): every agent's
    observations stacked ``(B, A, obs_dim)`` in, every agent's deterministic action out; a recurrent
    Sable's states (the manifest's ``state``) carried from call to call as ``hidden``."""

    def __init__(self, module: Any, joint: dict[str, Any], agents: Sequence[dict[str, Any]]) -> None:
        self.module = module
        self.joint = dict(joint)
        self.agents = list(agents)
        self.n_agents = int(joint["n_agents"])
        self.obs_dim = int(joint["obs_dim"])
        self.hidden_size = 0
        names = [t["name"] for t in joint["inputs"]]
        self.mask_width = int(joint["inputs"][names.index("avail")]["shape"][2]) if "avail" in names else 0
        self.state = [t for t in joint["inputs"] if t["name"] in joint.get("state", [])]
        """The carried inputs (a recurrent Sable's retention states), each output again after the actions."""

    def initial_hidden(self, n_envs: int = 1, device: Any = None) -> tuple[torch.Tensor, ...] | None:
        """None: nothing is carried from step to step; a recurrent Sable: its zero states."""
        if not self.state:
            return None
        return tuple(torch.zeros(n_envs, *t["shape"][1:], dtype=torch.long if t["dtype"] == "int64" else torch.float32)
                     for t in self.state)

    @torch.no_grad()
    def act(self, obs: Sequence[Any], avail: Sequence[Any] | None = None, deterministic: Any = True,
            hidden: Any = None, starts: Any = None) -> tuple[list[np.ndarray], tuple[torch.Tensor, ...] | None]:
        """(one action per agent, the states after the step or None): ``TeamActor.act``'s contract; the
        joint module takes the deterministic actions only (``deterministic=False`` is refused)."""
        if not deterministic:
            raise HarlError("this team acts through one joint module (MAT) whose export takes the "
                            "deterministic actions only; call act(..., deterministic=True)")
        single = np.ndim(obs[0]) == 1
        batch = 1 if single else int(np.shape(obs[0])[0])
        stacked = np.zeros((batch, self.n_agents, self.obs_dim), np.float32)
        for i in range(self.n_agents):
            row = np.asarray(obs[i], np.float32).reshape(batch, -1)
            stacked[:, i, :row.shape[1]] = row  # narrower observations are zero-padded, as MAT pads them
        inputs = [torch.as_tensor(stacked)]
        if self.mask_width:
            mask = np.ones((batch, self.n_agents, self.mask_width), np.float32)
            if avail is not None:
                for i in range(self.n_agents):
                    if avail[i] is not None:
                        mask[:, i] = np.asarray(avail[i], np.float32).reshape(batch, self.mask_width)
            inputs.append(torch.as_tensor(mask))
        new_state = None
        if self.state:
            if hidden is None:  # an episode's start
                begins = np.ones(batch, np.float32)
            else:
                begins = np.zeros(batch, np.float32) if starts is None else np.asarray(starts, np.float32).reshape(batch)
            carried = tuple(hidden) if hidden is not None else self.initial_hidden(batch) or ()
            outputs = self.module(*inputs, torch.as_tensor(begins), *carried)
            actions, new_state = outputs[0].numpy(), tuple(outputs[1:])
        else:
            actions = self.module(*inputs).numpy()
        return [actions[0, i] if single else actions[:, i] for i in range(self.n_agents)], new_state


_PARAM_NAMES = {"gaussian": ("mean", "std"), "squashed_gaussian": ("mu", "log_std"),
                "categorical": ("logits",), "deterministic": (), "q": ("q_values",)}


def load_policy(path: str | Path, checkpoint: str | Path | None = None) -> TeamActor | JointTeamActor:
    """The team in ``path``: a ``harl export --format torchscript`` folder, or a run directory."""
    folder = Path(path)
    if (folder / MANIFEST).is_file():
        manifest = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))
        if manifest["format"] != "torchscript":
            raise HarlError(
                f"{folder}: an export of format {manifest['format']!r}; load_policy reads TorchScript "
                f"exports (harl export RUN_DIR --format torchscript --out DIR); run .onnx files with "
                "onnxruntime (see docs/export.md)")
        with warnings.catch_warnings():  # torch.jit is deprecated, yet TorchScript is what libtorch loads
            warnings.simplefilter("ignore", DeprecationWarning)
            if "joint" in manifest:  # one module for the whole team (MAT)
                joint = manifest["joint"]
                module = torch.jit.load(str(folder / joint["file"]), map_location="cpu")
                return JointTeamActor(module, joint, manifest["agents"])
            modules = [torch.jit.load(str(folder / a["file"]), map_location="cpu") for a in manifest["agents"]]
        return TeamActor(modules, manifest["agents"])
    if (folder / "pipeline.toml").is_file():
        from harl.export import load_team
        from harl.export.deploy import deploy_team
        from harl.export.joint import deploy_joint, joint_entry, joint_policy
        from harl.export.manifest import agent_entry, joint_agent_entry
        from harl.export.sable import deploy_sable, sable_entry
        from harl.policy.sable_policy import SablePolicy

        team = load_team(folder, Path(checkpoint) if checkpoint else None)
        policy = joint_policy(team.policy)
        if policy is not None:
            joint = deploy_joint(policy, team.action_spaces[0], team.masked)
            agents = [joint_agent_entry(i, "", d, s) for i, (d, s)
                      in enumerate(zip(team.observation_dims, team.action_spaces))]
            return JointTeamActor(joint, joint_entry("", joint, team.action_spaces[0]), agents)
        if isinstance(team.policy, SablePolicy):
            sable = deploy_sable(team.policy, team.action_spaces[0], team.masked)
            agents = [joint_agent_entry(i, "", d, s) for i, (d, s)
                      in enumerate(zip(team.observation_dims, team.action_spaces))]
            return JointTeamActor(sable, sable_entry("", sable, team.action_spaces[0]), agents)
        modules = deploy_team(team.policy, team.action_spaces, team.masked, with_params=True)
        entries = [agent_entry(i, "", m, d, s) for i, (m, d, s)
                   in enumerate(zip(modules, team.observation_dims, team.action_spaces))]
        return TeamActor(modules, entries)
    raise HarlError(f"{folder}: neither a harl export folder (no {MANIFEST}) nor a run directory "
                    "(no pipeline.toml); pass what harl export --out or harl train wrote")

