"""harl.compare.marl_eval: marl-eval's JSON written, read back, and checked against its layout."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import numpy as np
import pytest

from harl.compare.marl_eval import check_marl_eval, export_results, read_results
from tests.compare.synthetic import STEPS, make_run, two_algorithms


def test_round_trip(tmp_path: Path) -> None:
    """env -> task -> algorithm -> run -> step: each evaluation's mean, its env steps, the absolute metric."""
    sweep = two_algorithms(tmp_path, seeds=2)
    make_run(sweep, "sequential", "ppo", 3, [1.0, 2.0, 3.0, 4.0], absolute=[5.0, 7.0])
    make_run(sweep, "simultaneous", "ppo", 3, [1.0, 2.0, 3.0, 4.0])
    result = export_results([sweep], tmp_path / "out" / "results.json")
    data, problems = read_results(result.path)
    assert data == result.data and problems == []
    assert list(data) == ["mpe"] and list(data["mpe"]) == ["simple_spread"]
    assert list(data["mpe"]["simple_spread"]) == ["HAPPO", "MAPPO"]
    run = data["mpe"]["simple_spread"]["HAPPO"]["seed_3"]
    assert list(run) == ["step_0", "step_1", "step_2", "step_3", "absolute_metrics"]
    assert [run[f"step_{k}"]["step_count"] for k in range(4)] == list(STEPS)
    assert run["step_3"] == {"step_count": 4000, "return": [4.0]}
    assert run["absolute_metrics"] == {"return": [5.0, 7.0]}
    assert data["mpe"]["simple_spread"]["MAPPO"]["seed_3"]["absolute_metrics"] == {"return": [4.0]}
    assert result.notes[0].startswith("5 of 6 runs have no absolute_metric.json, so their last evaluation's "
                                      "mean stands in for it: ")


def test_omit_missing_absolute(tmp_path: Path) -> None:
    """missing_absolute="omit" leaves the step out, and the check says marl-eval's matrices need it."""
    run = make_run(tmp_path, "sequential", "ppo", 1, [1.0])
    result = export_results([run], tmp_path / "r.json", missing_absolute="omit")
    assert list(result.data["mpe"]["simple_spread"]["HAPPO"]["seed_1"]) == ["step_0"]
    assert result.notes[-1] == ("mpe/simple_spread/HAPPO/seed_1: no absolute_metrics step (marl-eval's "
                                "matrices read the absolute metric from it)")


class TestCheck:
    def good(self) -> dict:
        run = {"step_0": {"step_count": 10, "return": [1.0]}, "step_1": {"step_count": 20, "return": [2.0]},
               "absolute_metrics": {"return": [2.0] * 10}}
        return {"mpe": {"a": {"HAPPO": {"1": run, "2": copy.deepcopy(run)}, "MAPPO": {"1": run, "2": run}},
                        "b": {"MAPPO": {"1": run, "2": run}, "HAPPO": {"1": run, "2": run}}}}

    def test_good(self) -> None:
        """The documented layout passes."""
        assert check_marl_eval(self.good()) == []

    def test_problems(self) -> None:
        """Unequal runs, unequal algorithms per task, bad step counts and commas are each named."""
        data = self.good()
        data["mpe"]["a"]["HAPPO"]["2"]["step_1"]["step_count"] = 5
        data["mpe"]["a"]["HAPPO"]["3"] = data["mpe"]["a"]["MAPPO"]["1"]
        data["mpe"]["b"]["MA,PPO"] = data["mpe"]["b"].pop("MAPPO")
        assert check_marl_eval(data) == [
            "mpe/a/HAPPO/2/step_1: step_count 5 does not increase",
            "mpe/b/MA,PPO: a comma in an algorithm name",
            "mpe: marl-eval needs the same algorithms on every task; found [('happo', 'ma,ppo'), ('happo', 'mappo')]",
            "mpe: marl-eval needs the same number of runs; found [2, 3]"]


def test_marl_eval_reads_it(tmp_path: Path) -> None:
    """marl-eval's own loader, diagnosis and rliable matrices accept the export (where marl-eval imports)."""
    processing = pytest.importorskip("marl_eval.utils.data_processing_utils",
                                     reason="marl-eval's loader is not importable (id-marl-eval 0.0.4 pins "
                                     "pandas 1.4.4, which has no wheel for Python >= 3.11)")
    from marl_eval.utils.diagnose_data_errors import DiagnoseData

    sweep = two_algorithms(tmp_path, seeds=3)
    path = export_results([sweep], tmp_path / "results.json").path
    raw = json.loads(path.read_text(encoding="utf-8"))
    assert all(DiagnoseData(raw).check_data()["mpe"].values())
    processed = processing.data_process_pipeline(raw_data=raw, metrics_to_normalize=["return"])
    assert "extra" in processed and processed["extra"]["number_of_runs"] == 3
    assert processed["extra"]["algorithm_list"] == ["happo", "mappo"]
    final, over_steps = processing.create_matrices_for_rliable(processed, "mpe", ["return"])
    assert final["mean_norm_return"]["happo"].shape == (3, 1)
    assert np.all(final["mean_norm_return"]["happo"] > final["mean_norm_return"]["mappo"])
    assert over_steps["mean_norm_return"]["happo"].shape == (3, 1, 4)  # runs, tasks, steps
