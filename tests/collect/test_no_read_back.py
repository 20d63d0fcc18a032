"""On a torch-native env the on-policy rollout reads nothing back from the device on a step
that ends no episode (the GPU path: one host synchronisation per episode end, none per step)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import torch

from harl.compose import build_stages
from harl.config.loading import load_spec_and_notes

ROOT = Path(__file__).resolve().parents[2]
READ_BACKS = ("item", "tolist", "__bool__", "nonzero", "cpu", "numpy", "__int__", "__float__", "__index__")


CUDA = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device here (benchmarks/cuda_check.sh)")


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=CUDA)])
@pytest.mark.parametrize(("pipeline", "length"), [
    ("happo_mpe_torch_spread.toml", "collector.rollout_length=24"),
    ("matd3_mpe_spread.toml", "collector.rollout_length=24"),
])
def test_steps_that_end_no_episode_read_nothing_back(pipeline: str, length: str, device: str,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """Counted on the CPU by patching every read-back method; on a GPU CUDA's own sync check
    raises on any synchronising call."""
    spec, _ = load_spec_and_notes(ROOT / "pipelines" / pipeline, [
        'env.kind="mpe_torch"', "env.max_episode_steps=50", "collector.n_envs=4", length, "run.torch_threads=1",
        f'env.device="{device}"', f'run.device="{device}"',
        *(["collector.warmup_steps=0"] if pipeline.startswith("matd3") else [])])
    stages = build_stages(spec)
    try:
        stages.collector.collect(stages.buffer)  # the reset and steps 1-24
        if hasattr(stages.buffer, "roll_over"):
            stages.buffer.roll_over()
        calls: Counter[str] = Counter()
        counting = [True]
        for name in READ_BACKS:
            real = getattr(torch.Tensor, name)

            def counted(self: torch.Tensor, *args: Any, _real: Any = real, _name: str = name, **kwargs: Any) -> Any:
                calls[_name] += counting[0]
                return _real(self, *args, **kwargs)

            monkeypatch.setattr(torch.Tensor, name, counted)
        venv = stages.collector.venv

        def once_per_iteration(read: Any) -> Any:  # the checkpoint's record, taken once per collect
            def uncounted() -> Any:
                counting[0] = False
                mode = torch.cuda.get_sync_debug_mode() if device == "cuda" else 0
                if device == "cuda":
                    torch.cuda.set_sync_debug_mode("default")
                try:
                    return read()
                finally:
                    counting[0] = True
                    if device == "cuda":
                        torch.cuda.set_sync_debug_mode(mode)
            return uncounted

        # the record: how the episodes began and, on-policy, the envs' whole state and the next start
        for owner, name in ((venv, "episode_starts"), (venv, "get_state"), (stages.buffer, "carried")):
            if hasattr(owner, name):
                monkeypatch.setattr(owner, name, once_per_iteration(getattr(owner, name)))
        if device == "cuda":
            torch.cuda.synchronize()
            torch.cuda.set_sync_debug_mode("error")
        try:
            stats = stages.collector.collect(stages.buffer)  # steps 25-48: no episode ends
        finally:
            if device == "cuda":
                torch.cuda.set_sync_debug_mode("default")
            monkeypatch.undo()
        assert stats.episodes == []
        assert calls == Counter()
    finally:
        stages.close()
