"""A new run directory's name: ``run.name`` with the algorithm word of harl.algorithms' table the
stages compose, then ``-s<seed>`` and the stamp of ``harl.rundir.naming.stamped``."""

from __future__ import annotations

from pathlib import Path

import pytest

from harl.config.loading import load_spec_and_notes
from harl.config.spec import PipelineSpec
from harl.run.lifecycle import new_run_dir, run_name
from harl.rundir import naming

PIPELINES = Path(__file__).parents[2] / "pipelines"


def spec(name: str, *overrides: str) -> PipelineSpec:
    return load_spec_and_notes(PIPELINES / f"{name}.toml", list(overrides))[0]


@pytest.mark.parametrize("name", ["happo_mpe_spread", "mappo_mpe_spread", "ippo_mpe_spread", "hatrpo_mpe_spread",
                                  "hasac_mpe_spread", "isac_mpe_spread", "qmix_mpe_spread_discrete"])
def test_a_shipped_pipeline_keeps_its_name(name: str) -> None:
    s = spec(name)
    assert run_name(s) == (s.run.name, None)


def test_other_stages_rename_the_run_from_the_table() -> None:
    name, note = run_name(spec("happo_mpe_spread", "updater.kind=simultaneous"))
    assert name == "mappo-mpe-spread"
    assert note is not None and 'names happo, but the stages compose mappo (updater.kind = "simultaneous"' in note
    assert run_name(spec("hasac_mpe_spread", "updater.kind=simultaneous"))[0] == "masac-mpe-spread"


def test_stages_the_table_does_not_name_keep_the_name() -> None:
    """Simultaneous TRPO is no named algorithm: no made-up name (``matrpo``), the run's own kept."""
    assert run_name(spec("hatrpo_mpe_spread", "updater.kind=simultaneous")) == ("hatrpo-mpe-spread", None)


def test_new_run_dir_is_stamped_and_counted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(naming.time, "strftime", lambda _: "20250102-030405")
    s = spec("mappo_mpe_spread", f"logging.dir={tmp_path.as_posix()}", "run.seed=7")
    first, second = new_run_dir(s), new_run_dir(s)
    assert first.is_dir() and second.is_dir()
    assert (first.name, second.name) == ("mappo-mpe-spread-s7-20250102-030405", "mappo-mpe-spread-s7-20250102-030405-2")
