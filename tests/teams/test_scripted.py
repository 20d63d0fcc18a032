"""harl.teams.scripted: scripted kinds found through the registry, acting inside their spaces and masks."""

from __future__ import annotations

import pytest
import torch
from gymnasium import spaces

from harl import registry
from harl.errors import ConfigError
from harl.teams.scripted import build_script, script_entry
from harl.teams.scripted.basic import NoopScriptConfig, RandomScriptConfig

E = 2000
OBS = [spaces.Box(-1.0, 1.0, (4,))] * 3
ACT = [spaces.Discrete(5), spaces.Box(-2.0, 3.0, (2,)), spaces.MultiDiscrete([2, 3])]
MASK = torch.tensor([0.0, 1.0, 0.0, 1.0, 1.0])
MULTI_MASK = torch.tensor([1, 1, 0, 1, 1], dtype=torch.bool)  # sub-action 0: both; sub-action 1: 1 and 2


def inputs(n: int = E) -> tuple[list[torch.Tensor], list[torch.Tensor | None], torch.Tensor]:
    obs = [torch.zeros(n, 4) for _ in OBS]
    avail: list[torch.Tensor | None] = [MASK.expand(n, -1), None, MULTI_MASK.expand(n, -1)]
    return obs, avail, torch.zeros(n, dtype=torch.bool)


def test_harls_kinds_are_registered_in_the_script_slot() -> None:
    kinds = registry.kinds("script")
    assert [e.kind for e in kinds][:2] == ["random", "noop"]  # random is the default
    assert {e.kind: e.module for e in kinds}["noop"] == "harl.teams.scripted.basic"
    assert script_entry("noop").config is NoopScriptConfig


def test_random_acts_uniformly_inside_spaces_and_masks() -> None:
    script = build_script(RandomScriptConfig(), OBS, ACT, seed=0)
    discrete, box, multi = script.act(*inputs())
    assert discrete.shape == (E, 1) and box.shape == (E, 2) and multi.shape == (E, 2)
    assert all(a.dtype == torch.float32 for a in (discrete, box, multi))
    counts = torch.bincount(discrete[:, 0].long(), minlength=5).float() / E
    assert counts[[0, 2]].sum() == 0  # never a masked action
    assert counts[[1, 3, 4]] == pytest.approx(torch.full((3,), 1 / 3), abs=0.05)
    assert bool(((box >= -2.0) & (box <= 3.0)).all()) and float(box.std()) > 1.0
    assert set(multi[:, 0].long().tolist()) == {0, 1} and set(multi[:, 1].long().tolist()) == {1, 2}


def test_random_is_seeded() -> None:
    first = build_script(RandomScriptConfig(), OBS, ACT, seed=5).act(*inputs(50))
    again = build_script(RandomScriptConfig(), OBS, ACT, seed=5).act(*inputs(50))
    other = build_script(RandomScriptConfig(), OBS, ACT, seed=6).act(*inputs(50))
    assert all(torch.equal(a, b) for a, b in zip(first, again))
    assert not all(torch.equal(a, b) for a, b in zip(first, other))


def test_an_env_with_no_action_allowed_still_gets_one() -> None:
    script = build_script(RandomScriptConfig(), OBS[:1], ACT[:1], seed=0)
    (action,) = script.act([torch.zeros(3, 4)], [torch.zeros(3, 5)], torch.zeros(3))
    assert bool(((action >= 0) & (action < 5)).all())


def test_random_refuses_an_unbounded_box() -> None:
    with pytest.raises(ConfigError, match="unbounded"):
        build_script(RandomScriptConfig(), OBS[:1], [spaces.Box(-float("inf"), 1.0, (2,))], seed=0)


def test_noop_takes_the_lowest_available_action_and_the_boxs_zero_in_bounds() -> None:
    script = build_script(NoopScriptConfig(), OBS, ACT, seed=0)
    discrete, box, multi = script.act(*inputs(4))
    assert discrete.tolist() == [[1.0]] * 4  # 0 is masked: the first allowed one
    assert box.tolist() == [[0.0, 0.0]] * 4
    assert multi.tolist() == [[0.0, 1.0]] * 4
    (clipped,) = build_script(NoopScriptConfig(), OBS[:1], [spaces.Box(0.5, 1.0, (3,))], seed=0).act(
        [torch.zeros(2, 4)], None, torch.zeros(2))
    assert clipped.tolist() == [[0.5] * 3] * 2
    (unmasked,) = build_script(NoopScriptConfig(), OBS[:1], ACT[:1], seed=0).act(
        [torch.zeros(2, 4)], None, torch.zeros(2))
    assert unmasked.tolist() == [[0.0]] * 2


def test_a_script_refuses_the_wrong_number_of_agents() -> None:
    script = build_script(NoopScriptConfig(), OBS, ACT, seed=0)
    with pytest.raises(ValueError, match='script "noop" was built for 3 agents, got observations of 2'):
        script.act([torch.zeros(1, 4)] * 2, None, torch.zeros(1))


def test_a_users_kind_is_found_by_module_and_name() -> None:
    entry = script_entry("tests.teams.user_script:ConstantScriptConfig")
    assert entry.slot == "script"
    script = build_script(entry.config(action=3), OBS, ACT, seed=0)
    assert [a.tolist() for a in script.act(*inputs(2))] == [[[3.0], [3.0]]] * 3


def test_a_users_kind_without_act_is_refused_at_build() -> None:
    config = script_entry("tests.teams.user_script:SilentScriptConfig").config()
    with pytest.raises(ConfigError, match="lacks act: a script stage needs act"):
        build_script(config, OBS, ACT, seed=0)


@pytest.mark.parametrize("kind, expected", [
    ("nope", r'script.kind = "nope" is not a scripted kind; known: "random", "noop"'),
    ("tests.teams.user_script:unused", "is not an attrs class"),
    ("tests.teams.user_scrip:ConstantScriptConfig", 'did you mean "tests.teams.user_script:ConstantScriptConfig"'),
])
def test_a_bad_kind_is_one_located_line(kind: str, expected: str) -> None:
    with pytest.raises(ConfigError, match=expected):
        script_entry(kind)
