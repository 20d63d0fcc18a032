"""run() is harl train in HARL's results layout; model_dir restores a harl checkpoint exactly."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from harl.errors import CheckpointError
from harl.runners import RUNNER_REGISTRY
from tests.runners.dicts import harl_dicts, off_policy, on_policy


@pytest.mark.parametrize(("algo", "pipeline"), [("happo", on_policy(steps=16)), ("hasac", off_policy(steps=20))])
def test_run_writes_harls_results_layout(tmp_path: Path, algo: str, pipeline: dict) -> None:
    """Two iterations: results/<env>/<task>/<algo>/<exp>/seed-00001-<time>/ holds harl's run and config.json."""
    r = RUNNER_REGISTRY[algo](*harl_dicts(tmp_path, algo), pipeline=pipeline)
    result = r.run()
    r.close()
    (run_dir,) = (tmp_path / "counting" / "fake" / algo / "test").iterdir()
    assert run_dir.name.startswith("seed-00001-") and run_dir == result.run_dir
    assert {p.name for p in run_dir.iterdir()} == {"metrics.csv", "checkpoints", "pipeline.toml", "config.json", ".lock"}
    assert len((run_dir / "metrics.csv").read_text().splitlines()) == 3  # header + 2 iterations
    assert json.loads((run_dir / "config.json").read_text())["main_args"]["algo"] == algo
    assert result.counters.iteration == 2


def test_model_dir_resumes_exactly(tmp_path: Path) -> None:
    """A runner given a run's directory as model_dir continues at its checkpoint with the same numbers
    (on the matrix game: the counting env has no RNG state to restore, so its episodes would start over)."""
    full = RUNNER_REGISTRY["happo"](*harl_dicts(tmp_path / "a", "happo", env="matrix"),
                                    pipeline=on_policy(env="matrix", length=3, steps=18))
    full.run()
    full.close()
    first = RUNNER_REGISTRY["happo"](*harl_dicts(tmp_path / "b", "happo", env="matrix"),
                                     pipeline=on_policy(env="matrix", length=3, steps=6))
    first.run()
    first.close()
    (run_dir,) = (tmp_path / "b" / "matrix" / "fake" / "happo" / "test").iterdir()
    resumed = RUNNER_REGISTRY["happo"](*harl_dicts(tmp_path / "c", "happo", env="matrix", model_dir=run_dir),
                                       pipeline=on_policy(env="matrix", length=3, steps=18))
    assert resumed._core.counters.iteration == 1
    resumed.run()
    resumed.close()

    def last_row(root: Path) -> dict[str, str]:
        (found,) = root.glob("matrix/fake/happo/test/*/metrics.csv")
        with found.open() as f:
            row = list(csv.DictReader(f))[-1]
        return {k: v for k, v in row.items() if k not in ("wall_time", "steps_per_s")}

    full_row, resumed_row = last_row(tmp_path / "a"), last_row(tmp_path / "c")
    assert len(resumed_row) > 15 and resumed_row == {k: full_row[k] for k in resumed_row}


def test_model_dir_without_a_checkpoint_says_the_key_and_the_fix(tmp_path: Path) -> None:
    """HARL's own model files are named as such; nothing is written."""
    models = tmp_path / "models"
    models.mkdir()
    (models / "actor_agent0.pt").write_bytes(b"")
    with pytest.raises(CheckpointError) as info:
        RUNNER_REGISTRY["happo"](*harl_dicts(tmp_path / "out", "happo", model_dir=models), pipeline=on_policy())
    assert str(info.value) == (
        f'algo_args.train.model_dir = "{models}": it holds HARL\'s own model files (actor_agent0.pt), which '
        "harl cannot load; set it to a harl run directory (the results/<env>/<task>/<algo>/<exp_name>/seed-... "
        "directory that a harl runner or harl train wrote; it holds checkpoints/iter_*.pt), or to one of its "
        "checkpoint files, or to None to start from scratch")
    assert not (tmp_path / "out").exists()
