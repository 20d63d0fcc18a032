"""One name per concept (issue 55): every renamed key of an older harl still loads, with exactly one
``HarlDeprecationWarning`` naming the new key; the shipped pipelines, the suites' overrides and
``harl convert`` speak only the new names."""

from __future__ import annotations

import re
import warnings
from functools import reduce
from pathlib import Path
from typing import Any

import pytest
import tomllib

from harl.config import renames
from harl.config.dump import dump_pipeline
from harl.config.loading import load_spec_and_notes, read_toml, structure_pipeline
from harl.errors import REMOVED_IN, HarlDeprecationWarning

ROOT = Path(__file__).parents[2]

RENAMES = [  # pipeline, old table, old key, a value, new table, new key
    ("qmix_smax_3m.toml", "updater.objective", "grad_norm_clip", 5.0, "updater.objective", "max_grad_norm"),
    ("hatrpo_mpe_spread.toml", "updater.objective", "backtrack_coeff", 0.7, "updater.objective", "backtrack_coef"),
    ("qmix_mpe_spread_discrete.toml", "updater", "timing", "per_iteration", "updater", "update_timing"),
    ("qmix_smax_3m.toml", "updater.objective", "standardise_rewards", False, "returns", "reward_norm"),
    ("ippo_lbf.toml", "returns", "standardise_rewards", False, "returns", "reward_norm"),
    ("qmix_smax_3m.toml", "env", "normalise_state", False, "env", "state_norm"),
    ("happo_mpe_spread.toml", "env", "max_cycles", 30, "env", "max_episode_steps"),
    ("happo_mpe_torch_spread.toml", "env", "max_cycles", 30, "env", "max_episode_steps"),
    ("happo_smax_3m.toml", "env", "max_steps", 30, "env", "max_episode_steps"),
    ("happo_vmas_transport.toml", "env", "max_steps", 30, "env", "max_episode_steps"),
    ("happo_air_combat_2v2.toml", "env", "max_steps", 30, "env", "max_episode_steps"),
]
OLD = {(table, old) for _, table, old, *_ in RENAMES}


def _at(data: Any, path: str) -> Any:
    return reduce(lambda d, k: d[k] if isinstance(d, dict) else getattr(d, k), path.split("."), data)


@pytest.mark.parametrize(("pipeline", "table", "old", "value", "new_table", "new"), RENAMES,
                         ids=[f"{r[0]}:{r[1]}.{r[2]}" for r in RENAMES])
def test_an_old_key_loads_with_one_warning(monkeypatch: pytest.MonkeyPatch, pipeline: str, table: str, old: str,
                                           value: object, new_table: str, new: str) -> None:
    monkeypatch.setattr(renames, "_WARNED", set())
    data = read_toml(ROOT / "pipelines" / pipeline)
    _at(data, new_table).pop(new, None)  # an older harl's file has only the old key
    _at(data, table)[old] = value
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        spec = structure_pipeline(data, pipeline)
    harl = [w for w in got if issubclass(w.category, HarlDeprecationWarning)]
    assert len(harl) == 1, [str(w.message) for w in harl]
    assert re.fullmatch(rf"\[{re.escape(table)}\] {old} is deprecated: use \[{re.escape(new_table)}\] {new} "
                        rf"\(.* removed in {REMOVED_IN}\)", str(harl[0].message))
    assert getattr(_at(spec, new_table), new) == value
    assert f"\n{old} = " not in dump_pipeline(spec)  # a resolved pipeline speaks the new name


def test_an_old_key_by_set_overrides_the_files_new_one(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(renames, "_WARNED", set())
    with pytest.warns(HarlDeprecationWarning, match=r"\[env\] max_cycles is deprecated: use \[env\] max_episode_steps"):
        spec, _ = load_spec_and_notes(ROOT / "pipelines" / "happo_mpe_spread.toml", ["env.max_cycles=40"])
    assert spec.env.max_episode_steps == 40


def test_the_packages_own_keyword_is_left_alone() -> None:
    """``[env.kwargs]`` is handed to the env package as it is: PettingZoo's ``max_cycles`` stays its own."""
    data = read_toml(ROOT / "pipelines" / "happo_mpe_spread.toml")
    data["env"] = {"kind": "pettingzoo", "env": "pettingzoo.mpe.simple_spread_v3", "kwargs": {"max_cycles": 30}}
    assert renames.renamed(data, None, "x.toml")["env"]["kwargs"] == {"max_cycles": 30}


def _shipped() -> list[Path]:
    return sorted((ROOT / "pipelines").glob("*.toml"))


def _keys(table: Any, path: tuple[str, ...] = ()) -> set[tuple[str, str]]:
    found = set()
    for key, value in table.items():
        if isinstance(value, dict):
            found |= _keys(value, (*path, key))
        else:
            found.add((".".join(path), key))
    return found


def test_shipped_pipelines_use_only_the_new_names() -> None:
    """Top-level tables and a team's own (``[teams.NAME.updater.objective]`` is ``[updater.objective]``)."""
    old = {f"{path.name}: [{t}] {k}" for path in _shipped()
           for t, k in _keys(tomllib.loads(path.read_text(encoding="utf-8")))
           if (re.sub(r"^teams\.[^.]+\.", "", t), k) in OLD}
    assert old == set()


def test_suite_overrides_use_only_the_new_names() -> None:
    found = []
    for path in sorted((ROOT / "benchmarks" / "suites").glob("*.toml")):
        for entry in re.findall(r'"([a-z_.]+)=', path.read_text(encoding="utf-8")):
            table, _, key = entry.rpartition(".")
            if (table, key) in OLD:
                found.append(f"{path.name}: {entry}")
    assert found == []


def test_harl_convert_writes_the_new_names() -> None:
    from harl.compat import convert

    data = Path(__file__).parents[1] / "compat" / "data"
    with warnings.catch_warnings():
        warnings.simplefilter("error", HarlDeprecationWarning)
        trpo = convert(data / "mamujoco_Ant-v2-4x2_hatrpo.json")
        mpe = convert(data / "pettingzoo_mpe_simple_spread_v2-continuous_happo.json")
        trpo.spec(), mpe.spec()
    assert "backtrack_coef" in trpo.pipeline["updater"]["objective"]
    assert "max_episode_steps" in mpe.pipeline["env"] and "max_cycles" not in mpe.pipeline["env"]
    assert "backtrack_coeff" not in trpo.to_toml() and "max_cycles" not in mpe.to_toml()
