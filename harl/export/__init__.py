"""``harl export RUN_DIR --format onnx|torchscript --out DIR``: a trained team for deployment.

::

    team = load_team(run_dir, checkpoint)           # the run's team, its spaces, its pipeline
    modules = deploy_team(team.policy, ...)         # one tensor function per agent (deploy.py),
                                                    # of what team.policy.export_actors() gives
    agent<i>.onnx / agent<i>.pt + policy.json       # one file per agent, the manifest beside them

A team that acts through one network (MAT, MAT-Dec; Sable, sable.py) ships as one TorchScript file
instead, ``team.pt``, of its whole auto-regressive acting (joint.py; the manifest's ``"joint"``).

Each file computes the deterministic action in the env's own action space, as harl's
``evaluate`` would take it; ``with_params`` adds the distribution's parameters.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import attrs
import torch
from gymnasium import spaces
from torch import nn

from harl.errors import HarlError, MissingExtraError
from harl.export.deploy import DeployActor, deploy_team
from harl.export.joint import deploy_joint, joint_entry, joint_example, joint_policy
from harl.export.manifest import agent_entry, joint_agent_entry, write_manifest
from harl.export.sable import deploy_sable, sable_entry, sable_example
from harl.fs import writing
from harl.nets.heads import avail_size
from harl.policy.mat import MultiAgentTransformer
from harl.policy.sable_policy import SablePolicy

FORMATS = {"onnx": ".onnx", "torchscript": ".pt"}
ONNX_OPSET = 17


@attrs.frozen
class LoadedTeam:
    """A run's actors with their checkpoint's weights, and what export needs to describe them."""

    policy: torch.nn.Module
    observation_dims: list[int]
    action_spaces: list[spaces.Space]
    masked: bool
    """The env returns available-action masks (the actors then take them as an input)."""
    pipeline: str
    checkpoint: Path


def load_team(run_dir: Path, checkpoint: Path | None = None, team: str | None = None) -> LoadedTeam:
    """The run's policy on the CPU (its newest checkpoint unless ``checkpoint``); builds one env for its spaces.

    A run with ``[teams]``: the learning team ``team`` (its first one unless named), its agents only.
    """
    from harl.run.open import open_run

    with open_run(run_dir, checkpoint, one_env=True) as run:
        venv = run.stages.eval_venv
        _, _, avail = venv.reset(seed=0)
        agents = list(range(venv.n_agents))
        policy = run.stages.policy
        if run.spec.teams:
            learning = [t.name for t in run.spec.learning_teams]
            if team is None and len(learning) > 1:
                raise HarlError(f"{run_dir}: this run has {len(learning)} learning teams ({', '.join(learning)}); "
                                "name the one to export with --team NAME")
            name = team or learning[0]
            if name not in learning:
                raise HarlError(f"{run_dir}: --team {name!r} is not a learning team of this run; write one of: "
                                f"{', '.join(learning)}")
            own = run.stages.teams[name]
            agents, policy = list(own.agents), own.policy
        elif team is not None:
            raise HarlError(f"{run_dir}: --team {team!r}: this run has no [teams]; export its policy without --team")
        dims = [int(torch.tensor(venv.observation_spaces[i].shape).prod()) for i in agents]
        spaces_ = [venv.action_spaces[i] for i in agents]
        return LoadedTeam(policy, dims, spaces_, avail is not None, run.pipeline_text, run.checkpoint)


def example_inputs(module: DeployActor, obs_dim: int, space: spaces.Space, batch: int = 2) -> tuple[torch.Tensor, ...]:
    """Inputs of the right shapes for tracing (all actions available, zero GRU state)."""
    inputs = [torch.zeros(batch, obs_dim)]
    if module.masked:
        inputs.append(torch.ones(batch, avail_size(space)))
    if module.recurrent:  # a GRU: an on-policy Actor's or an agent Q network's
        inputs.append(torch.zeros(batch, module.hidden_size))
    if module.last_action:  # an agent Q network's previous action: none yet
        inputs.append(torch.full((batch,), -1, dtype=torch.long))
    return tuple(inputs)


def require_onnx() -> None:
    for name in ("onnx", "onnxruntime"):
        try:
            __import__(name)
        except ImportError as exc:
            raise MissingExtraError("harl export --format onnx", "onnx", name) from exc


def write_torchscript(module: nn.Module, example: tuple[torch.Tensor, ...], path: Path) -> None:
    # torch.jit is deprecated in favour of torch.export, but TorchScript is still what C++
    # (libtorch) loads; the GRU's shape checks become trace-time constants (harmless here).
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        warnings.simplefilter("ignore", torch.jit.TracerWarning)
        traced = torch.jit.trace(module, example, check_trace=False)
    traced.save(str(path))


def write_onnx(module: DeployActor, example: tuple[torch.Tensor, ...], path: Path) -> None:
    names_in, names_out = module.input_names(), module.output_names()
    axes = {name: {0: "batch"} for name in names_in + names_out}
    # The TorchScript-based exporter (deprecated, still in torch 2.13): it needs no onnxscript
    # and keeps the batch axis free through the GRU (whose h0 is an input, so the GRU
    # batch-size warning does not apply).
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        warnings.simplefilter("ignore", UserWarning)
        warnings.simplefilter("ignore", torch.jit.TracerWarning)
        torch.onnx.export(module, example, str(path), input_names=names_in, output_names=names_out,
                          dynamic_axes=axes, opset_version=ONNX_OPSET, dynamo=False)


def export_team(team: LoadedTeam, fmt: str, out: Path, with_params: bool = False) -> Path:
    """Write one file per agent and ``policy.json`` into ``out``; the manifest's path."""
    if fmt not in FORMATS:
        raise HarlError(f"--format: expected one of {', '.join(FORMATS)}, got {fmt!r}")
    policy = joint_policy(team.policy)
    if policy is not None:  # one network for the whole team (MAT)
        return export_joint(team, policy, fmt, out, with_params)
    if isinstance(team.policy, SablePolicy):
        return export_sable(team, team.policy, fmt, out, with_params)
    if fmt == "onnx":
        require_onnx()
    make_out(out)
    write = write_onnx if fmt == "onnx" else write_torchscript
    entries: list[dict[str, Any]] = []
    modules = deploy_team(team.policy, team.action_spaces, team.masked, with_params)
    for i, (module, dim, space) in enumerate(zip(modules, team.observation_dims, team.action_spaces)):
        file = f"agent{i}{FORMATS[fmt]}"
        write(module, example_inputs(module, dim, space), out / file)
        entries.append(agent_entry(i, file, module, dim, space))
    return write_manifest(out, fmt, entries, team.pipeline, team.checkpoint)


JOINT_ONNX = ("MAT's agents act through one transformer that decodes one agent after another; harl export ships "
              "it as one TorchScript module only: use --format torchscript")


def export_joint(team: LoadedTeam, policy: MultiAgentTransformer, fmt: str, out: Path,
                 with_params: bool) -> Path:
    """A team acting through one network (MAT): one file, ``team.pt``, every agent's actions at once."""
    if fmt != "torchscript":
        raise HarlError(JOINT_ONNX)
    if with_params:
        raise HarlError("MAT's export takes the deterministic actions only (its decoding feeds each agent's "
                        "action to the next); export it without --with-distribution")
    module = deploy_joint(policy, team.action_spaces[0], team.masked)
    make_out(out)
    file = "team.pt"
    write_torchscript(module, joint_example(module), out / file)
    entries = [joint_agent_entry(i, file, dim, space)
               for i, (dim, space) in enumerate(zip(team.observation_dims, team.action_spaces))]
    return write_manifest(out, fmt, entries, team.pipeline, team.checkpoint, joint_entry(file, module, team.action_spaces[0]))


SABLE_ONNX = ("Sable's agents act through one network that decodes one agent after another; harl export ships "
              "it as one TorchScript module only: use --format torchscript")


def export_sable(team: LoadedTeam, policy: SablePolicy, fmt: str, out: Path, with_params: bool) -> Path:
    """A Sable team: one file, ``team.pt``, every agent's deterministic actions (and, recurrent, the
    retention states carried in and out; harl.export.sable)."""
    if fmt != "torchscript":
        raise HarlError(SABLE_ONNX)
    if with_params:
        raise HarlError("Sable's export takes the deterministic actions only (its decoding feeds each agent's "
                        "action to the next); export it without --with-distribution")
    module = deploy_sable(policy, team.action_spaces[0], team.masked)
    make_out(out)
    file = "team.pt"
    write_torchscript(module, sable_example(module), out / file)
    entries = [joint_agent_entry(i, file, dim, space)
               for i, (dim, space) in enumerate(zip(team.observation_dims, team.action_spaces))]
    return write_manifest(out, fmt, entries, team.pipeline, team.checkpoint,
                          sable_entry(file, module, team.action_spaces[0]))


def check_out(out: Path) -> None:
    """Refuse an ``--out`` that cannot be the export's folder (a file, or a path under one), before
    anything is loaded or written."""
    for path in (out, *out.parents):
        if path.exists() or path.is_symlink():
            if not path.is_dir():
                where = "is a file" if path == out else f"cannot be made: {path} is a file, not a folder"
                raise HarlError(f"--out {out}: {where}; the export writes agent<i> files and policy.json into a "
                                "folder: pass a new folder (or an existing one) for --out")
            return


def make_out(out: Path) -> None:
    """The export's folder, made (a ``ResourceError`` naming it when it cannot be)."""
    check_out(out)
    with writing(out, "the export's folder", fix="pass a writable folder for --out"):
        out.mkdir(parents=True, exist_ok=True)


def acts_jointly(run_dir: Path, team: str | None) -> str | None:
    """Why the run's (or its learning ``team``'s) policy exports as TorchScript only, when it is one network
    for the whole team (MAT, MAT-Dec, Sable), told from its pipeline.toml alone (nothing built); else None."""
    from harl.run.open import spec_of_run
    from harl.update.objectives.mat import TransformerPPOConfig
    from harl.update.objectives.sable import SableConfig

    spec, _ = spec_of_run(run_dir)
    specs = [spec]
    if spec.teams:
        specs = [t.spec for t in spec.learning_teams if t.spec is not None and (team is None or t.name == team)][:1]
    objectives = [getattr(s.updater, "objective", None) for s in specs]
    if any(isinstance(o, TransformerPPOConfig) for o in objectives):
        return JOINT_ONNX
    return SABLE_ONNX if any(isinstance(o, SableConfig) for o in objectives) else None


def export_run(run_dir: Path, checkpoint: Path | None, fmt: str, out: Path, with_params: bool = False,
               team: str | None = None) -> Path:
    """``harl export``: load the run's policy (one team's, ``team``) and export it; the manifest's path."""
    if fmt not in FORMATS:
        raise HarlError(f"--format: expected one of {', '.join(FORMATS)}, got {fmt!r}")
    check_out(out)  # before anything is built
    if fmt == "onnx":
        reason = acts_jointly(run_dir, team)
        if reason is not None:  # a format the policy cannot take: no package would help
            raise HarlError(f"{run_dir}: {reason}")
        require_onnx()
    return export_team(load_team(run_dir, checkpoint, team), fmt, out, with_params)
