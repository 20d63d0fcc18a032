"""harl compare across families: value-decomposition runs (IQL, VDN, QMIX) beside on-policy ones."""

from __future__ import annotations

from pathlib import Path

import pytest

import tests.value.fake_envs  # noqa: F401 - registers the "guess" env kind
from harl.cli import main
from harl.compare.runs import algorithm_of, load_runs
from tests.compare.helpers import needs_rliable
from tests.compare.synthetic import make_run

GUESS = Path(__file__).parents[1] / "value" / "guess_qmix.toml"
MAPPO_GUESS = "\n".join([
    '[run]\nname = "mappo-guess"\ntotal_env_steps = 48', '[env]\nkind = "guess"\nmax_steps = 4',
    '[collector]\nn_envs = 2\nrollout_length = 8', '[updater]\nkind = "simultaneous"',
    '[policy]\nhidden_sizes = [16]', '[critic]\nhidden_sizes = [16]',
    '[evaluator]\nevery_iterations = 1\nepisodes = 2\nn_envs = 2', '[logging]\nprogress = false'])
"""MAPPO on the value family's "guess" env: the same task as the QMIX runs beside it."""


@pytest.mark.parametrize(("critic", "name"), [("none", "IQL"), ("vdn", "VDN"), ("qmix", "QMIX"), (None, "QMIX")])
def test_value_algorithms_are_named_by_their_mixer(critic: str | None, name: str) -> None:
    pipeline: dict = {"updater": {"kind": "q_learning", "objective": {"kind": "joint_td"}}}
    if critic is not None:
        pipeline["critic"] = {"kind": critic}
    assert algorithm_of(pipeline) == name


def test_a_value_sweep_beside_an_on_policy_one_groups_by_algorithm(tmp_path: Path) -> None:
    discrete = {"env": {"continuous_actions": False}}
    for seed in (1, 2):
        make_run(tmp_path / "on", "sequential", "ppo", seed, [1.0, 2.0, 3.0, 4.0], extra=discrete)
        for mixer in ("qmix", "vdn", "none"):
            make_run(tmp_path / "value" / mixer, "q_learning", "joint_td", seed, [1.0, 1.5, 2.0, 2.5],
                     extra={**discrete, "critic": {"kind": mixer}, "collector": {"kind": "episodes"}})
    records, notes = load_runs([tmp_path / "on", tmp_path / "value"])
    assert notes == []
    assert sorted({(r.algorithm, r.task) for r in records}) == [
        (a, "simple_spread-discrete") for a in ("HAPPO", "IQL", "QMIX", "VDN")]


@needs_rliable
def test_harl_compare_takes_trained_runs_of_both_families(tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    """Real runs (QMIX, VDN and MAPPO on the same env, two seeds each) in one harl compare."""
    mappo = tmp_path / "mappo.toml"
    mappo.write_text(MAPPO_GUESS)
    sweep = tmp_path / "sweep"
    for seed in (1, 2):
        quick = ["--set", "run.total_env_steps=48", "--set", "evaluator.every_iterations=1", "--set",
                 "evaluator.episodes=2", "--set", "buffer.batch_size=4", "--set", f"run.seed={seed}"]
        for mixer in ("qmix", "vdn"):
            run = sweep / f"{mixer}-s{seed}"
            assert main(["train", str(GUESS), *quick, "--set", f"critic.kind={mixer}", "--run-dir", str(run)]) == 0
        assert main(["train", str(mappo), "--set", f"run.seed={seed}", "--run-dir", str(sweep / f"mappo-s{seed}")]) == 0
    records, _ = load_runs([sweep])
    assert sorted({r.algorithm for r in records}) == ["MAPPO", "QMIX", "VDN"]
    capsys.readouterr()
    out = tmp_path / "compare"
    assert main(["compare", str(sweep), "--out", str(out), "--reps", "100", "--bounds", "guess=0,4",
                 "--no-figures"]) == 0
    text = capsys.readouterr().out
    assert all(name in text for name in ("MAPPO", "QMIX", "VDN"))
    assert (out / "results.md").is_file()
