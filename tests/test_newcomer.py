"""What a newcomer tripped over (issue 39, part 2): a misspelt table in --set names its --set, more
torch threads than cores are capped with a note, a swapped algorithm names its run directory,
and harl check wraps the returns settings whole."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import harl
from harl.cli import main
from harl.errors import ConfigError

ROOT = Path(__file__).resolve().parents[1]
HAPPO = ROOT / "pipelines" / "happo_mpe_spread.toml"
TINY = ["run.total_env_steps=100", "collector.n_envs=2", "collector.rollout_length=25", "collector.workers=1",
        "evaluator.episodes=1", "evaluator.n_envs=1", "run.device=cpu", "logging.progress=false"]


def test_a_misspelt_table_in_set_names_its_set() -> None:
    with pytest.raises(ConfigError) as info:
        harl.load_pipeline(HAPPO, ["updatr.kind=simultaneous"])
    assert 'updatr (from --set updatr.kind=simultaneous): unknown table (did you mean "updater"?)' in str(info.value)


def test_more_torch_threads_than_cores_are_capped_with_a_note(capsys: pytest.CaptureFixture[str]) -> None:
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    assert main(["check", str(HAPPO), "--set", f"run.torch_threads={cores + 2}", *(
        a for s in TINY for a in ("--set", s))]) == 0
    out = capsys.readouterr().out
    assert f"note: {HAPPO}: run.torch_threads = {cores + 2} is more threads than this machine's {cores} core" in out
    import torch

    assert torch.get_num_threads() <= cores


def test_harl_check_wraps_the_returns_settings_whole(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", str(HAPPO), *(a for s in TINY for a in ("--set", s))]) == 0
    out = " ".join(capsys.readouterr().out.replace("│", " ").split())
    assert "zero_truncated_advantage=False" in out


def test_a_swapped_algorithm_names_its_run_directory(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["train", str(HAPPO), "--set", "updater.kind=simultaneous", "--set", f'logging.dir="{tmp_path}"',
                 "--quiet", *(a for s in TINY for a in ("--set", s))]) == 0
    out = capsys.readouterr().out
    assert [p.name.rsplit("-s1-", 1)[0] for p in tmp_path.iterdir()] == ["mappo-mpe-spread"]
    assert 'note: run.name "happo-mpe-spread" names happo, but the stages compose mappo' in out


@pytest.mark.parametrize(("busy", "policy", "noted"), [(1.5, "", True), (0.2, "", False), (1.5, "passive", False)])
def test_several_threads_on_a_busy_machine_get_a_note(monkeypatch: pytest.MonkeyPatch, busy: float, policy: str,
                                                      noted: bool) -> None:
    from harl import compose

    monkeypatch.setattr(compose, "others_busy_cores", lambda: busy)
    monkeypatch.setenv("OMP_WAIT_POLICY", policy)
    notes = compose.busy_cores_note(2, 2, "p.toml")
    assert bool(notes) is noted
    if noted:
        assert notes[0].startswith("p.toml: run.torch_threads = 2 on a busy machine (1.5 of 2 cores busy with other work)")
        assert "set run.torch_threads = 1, or export OMP_WAIT_POLICY=PASSIVE" in notes[0]
    assert compose.busy_cores_note(1, 2, "p.toml") == []


def test_the_other_work_is_measured_in_cores() -> None:
    from harl.compose import others_busy_cores

    busy = others_busy_cores(0.05)
    cores = os.cpu_count() or 1
    assert busy is None or -0.01 <= busy <= cores + 0.01
