"""``[run]``, ``[logging]`` and ``[checkpoint]``: settings of the run, not of any stage."""

from __future__ import annotations

import attrs

from harl.settings import in_range, one_of, positive, setting


def _device(_: object, attribute: attrs.Attribute, value: str) -> None:  # type: ignore[type-arg]
    from harl.settings import InvalidSetting

    ok = value in ("auto", "cpu", "cuda") or (value.startswith("cuda:") and value[5:].isdigit())
    if not ok:
        raise InvalidSetting(attribute.name, f"expected one of: auto, cpu, cuda, cuda:N; got {value!r}")


@attrs.frozen
class RunConfig:
    """``[run]``."""

    name: str = setting("run", "run name; the run directory is <logging.dir>/<name>-s<seed>-<time>")
    seed: int = setting(1, "seeds torch, numpy, python and the environments", in_range(0, None))
    total_env_steps: int = setting(10_000_000, "stop after this many env steps (over all envs)", positive())
    device: str = setting("auto", "auto (cuda when available), cpu, cuda or cuda:N", _device)
    torch_threads: int = setting(1, "torch CPU threads (0: torch's default); 1 suits small MLPs on few cores", in_range(0, None))
    precision: str = setting(
        "fp32",
        "off-policy gradient steps: fp32, or bf16 (bfloat16 autocast of the hidden layers' matmuls; first and last "
        "layers, losses and optimisers stay fp32; needs a CPU with AVX512-BF16 or AMX, or a GPU). On-policy runs take fp32",
        one_of(("fp32", "bf16")))


@attrs.frozen
class LoggingConfig:
    """``[logging]``."""

    dir: str = setting("runs", "parent directory of run directories")
    progress: bool = setting(True, "rich progress display (a plain line per log_every iterations when not a terminal)")
    log_every: int = setting(10, "iterations between plain log lines when the output is not a terminal", positive())
    tensorboard: bool = setting(False, 'also write every metric as TensorBoard scalars into the run directory (pip install "harl[tensorboard]")')
    mlflow: bool = setting(False, 'also log the run to MLflow: pipeline params, every metric per iteration, pipeline.toml (pip install "harl[mlflow]")')
    mlflow_tracking_uri: str = setting("", "MLflow tracking URI (empty: MLFLOW_TRACKING_URI, else a file store mlruns/ beside the run directory)")
    mlflow_experiment: str = setting("harl", "MLflow experiment name")
    wandb: bool = setting(False, 'also log the run to Weights & Biases, the same content as MLflow (pip install "harl[wandb]")')
    wandb_project: str = setting("harl", "wandb project")
    wandb_entity: str = setting("", "wandb entity (empty: your default)")
    wandb_mode: str = setting("", "wandb mode (empty: WANDB_MODE or wandb's default)", one_of(("", "online", "offline", "disabled")))
    tracker_checkpoint: bool = setting(False, "also store the final checkpoint as an MLflow / wandb artifact")


@attrs.frozen
class CheckpointConfig:
    """``[checkpoint]``."""

    every_iterations: int = setting(50, "write a checkpoint every this many iterations (and always at the end)", positive())
    keep: int = setting(3, "checkpoints kept on disk (older ones are deleted)", positive())
    replay_buffer: bool = setting(False, "also save the replay buffer (off-policy): exact resume, at the cost of its size on disk")
