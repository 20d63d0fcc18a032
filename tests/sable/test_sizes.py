"""``harl check``'s memory estimate counts a policy's own step-record fields: a recurrent Sable's three
retention states (48 KiB per env step at Mava's sizes), which the rollout buffer stores for every step."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

import harl
from harl.api import load_pipeline
from harl.cli import main
from harl.families.on_policy import FAMILY
from harl.sizes import UPDATE_FACTOR, planned_record_bytes, record_field_bytes

PIPELINES = Path(__file__).parents[2] / "pipelines"
REC, FF = PIPELINES / "sable_mpe_torch_spread.toml", PIPELINES / "sable-ff_mpe_torch_spread.toml"
SMALL = ["collector.n_envs=4", "collector.rollout_length=16", "run.device=\"cpu\""]
MARGIN = {"defaults": 0.01, "2_blocks": 0.01, "ff": 0.05}
"""How near the estimate is to what the buffer's tensors take: it counts every field for T + 1 slots and one
value per env (the buffer has T slots for some, and Sable's critic one value per agent: 4 x 4 x 2 bytes
more per env step, 5 % of the feed-forward Sable's 600-byte steps, under 0.1 % of the recurrent one's 49 kB)."""


def buffer_bytes(buffer: object) -> int:
    """Every tensor the rollout buffer holds, in bytes."""
    total = 0
    for value in vars(buffer).values():
        items = value.values() if isinstance(value, dict) else value if isinstance(value, list) else [value]
        total += sum(x.numel() * x.element_size() for x in items if isinstance(x, torch.Tensor))
    return total


def test_sables_fields_by_hand() -> None:
    """3 states x n_head x n_block x (embed_dim / n_head)^2 float32: 3 x 1 x 1 x 64^2 x 4 = 49,152 bytes
    (48 KiB); 2 heads and 2 blocks: 3 x 2 x 2 x 32^2 x 4 = 49,152 too; the encoding adds an int64."""
    objective = load_pipeline(REC).updater.objective
    assert planned_record_bytes(objective, 3) == 49_152
    two = load_pipeline(REC, ["updater.objective.n_head=2", "updater.objective.n_block=2"]).updater.objective
    assert planned_record_bytes(two, 3) == 3 * 2 * 2 * 32 * 32 * 4
    encoded = load_pipeline(REC, ["updater.objective.timestep_positional_encoding=true"]).updater.objective
    assert planned_record_bytes(encoded, 3) == 49_152 + 8
    assert planned_record_bytes(load_pipeline(FF).updater.objective, 3) == 0


def test_mats_orders_are_counted() -> None:
    """order = "episode": one int64 per agent and env step; fixed order: nothing recorded."""
    mat = PIPELINES / "mat_mpe_spread.toml"
    assert planned_record_bytes(load_pipeline(mat, ['updater.objective.order="episode"']).updater.objective, 3) == 24
    assert planned_record_bytes(load_pipeline(mat).updater.objective, 3) == 0


@pytest.mark.parametrize("extra", [[], ["updater.objective.n_block=2", "updater.objective.embed_dim=32"],
                                   ["updater.objective.memory=false"]], ids=["defaults", "2_blocks", "ff"])
def test_estimate_within_margin_of_the_buffers_bytes(extra: list[str], request: pytest.FixtureRequest) -> None:
    """The family's memory row (what ``harl check`` and the size check read) against the built buffer."""
    with harl.build(REC, [*SMALL, *extra]) as built:
        spec = load_pipeline(REC, [*SMALL, *extra])
        (need,) = FAMILY.memory(spec, built.venv)
        estimate = need.bytes // UPDATE_FACTOR
        actual = buffer_bytes(built.buffer)
        assert abs(estimate - actual) <= MARGIN[request.node.callspec.id] * actual, (estimate, actual)
        fields = record_field_bytes(built.policy.record_fields)
        assert fields == planned_record_bytes(spec.updater.objective, 3)
        if fields:  # without the fields the estimate would miss most of the buffer
            assert fields * 17 * 4 > 0.9 * actual


def test_check_reports_the_fields_in_bytes_per_step(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", str(REC), "--set", "collector.n_envs=4"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    per_step = [w for w in out.split("bytes per env step")[0].split()][-1]
    assert int(per_step.replace(",", "")) > 49_152


def test_team_model_prediction_by_hand() -> None:
    """32 env steps of 1,024 agents, width 64, 1 block, 1 head, 18-float observations.  MAT: 32,768 tokens x
    (64 x (40 + 24) + 3 x 18) floats + (3 + 3) x 32 x 1,024^2 floats, 4 bytes each = 543,948,800 + 805,306,368;
    Sable in chunks of 32: 32,768 x (64 x (80 + 24) + 54) floats + (4 + 3) x 32 x 32 x 1,024 = 879,493,120 +
    29,360,128; unchunked: (4 + 3) x 32 x 1,024^2 floats = 939,524,096 bytes for the square part."""
    from harl.sizes import team_model_train_bytes

    assert team_model_train_bytes("mat", 32, 1024, 64, 1, 1, 18) == 543_948_800 + 805_306_368
    assert team_model_train_bytes("sable", 32, 1024, 64, 1, 1, 18, chunk=32) == 879_493_120 + 29_360_128
    assert team_model_train_bytes("sable", 32, 1024, 64, 1, 1, 18) == 879_493_120 + 939_524_096
    with pytest.raises(ValueError, match="kind must be mat or sable"):
        team_model_train_bytes("qmix", 1, 1, 1, 1, 1, 1)
