"""harl.compose: Stages as a context manager and the rows of ``harl check`` from ``Stages.describe``."""

from __future__ import annotations

import pytest

from harl.cli import main
from harl.compose import build_stages
from harl.config.loading import load_spec_and_notes

SMALL = ["collector.backend=inline", "collector.n_envs=2", "evaluator.n_envs=1"]


@pytest.mark.parametrize("pipeline", ["pipelines/happo_mpe_spread.toml", "pipelines/hasac_mpe_spread.toml"])
def test_describe_gives_the_rows_harl_check_prints(pipeline: str, capsys: pytest.CaptureFixture[str]) -> None:
    """Every cell of ``describe()`` is in ``harl check``'s table, row by row, in order."""
    spec, _ = load_spec_and_notes(pipeline, SMALL)
    with build_stages(spec, pipeline) as stages:
        rows = stages.describe()
    assert [slot for slot, _, _ in rows] == ["env", "collector", "buffer", "returns", "critic", "updater",
                                             "policy", "evaluator"]
    assert main(["check", pipeline, *[x for s in SMALL for x in ("--set", s)]]) == 0
    table = capsys.readouterr().out
    for slot, kind, built in rows:
        line = next(line for line in table.splitlines() if line.startswith(f"│ {slot} "))
        assert kind in line and built[:30] in line


def test_leaving_the_with_block_closes_the_envs() -> None:
    """``with build_stages(spec) as stages`` closes the training and evaluation envs."""
    spec, _ = load_spec_and_notes("pipelines/happo_mpe_spread.toml", SMALL)
    closed = []
    with build_stages(spec) as stages:
        for venv in (stages.venv, stages.eval_venv):
            venv.close = lambda venv=venv: closed.append(venv)  # type: ignore[method-assign]
    assert len(closed) == 2
