"""harl.compat.keys: every key of every HARL config is accounted for."""

from __future__ import annotations

import json
from pathlib import Path

from harl.compat import keys
from harl.compat.data import ALGOS, ENVS, algo_defaults, env_defaults

DATA = Path(__file__).parent / "data"


def _paths(config: dict) -> set[str]:
    env = config["main_args"]["env"]
    found = {f"{s}.{k}" for s, table in config["algo_args"].items() for k in table}
    return found | {f"env:{env}.{k}" for k in config["env_args"]} | {f"main.{k}" for k in config["main_args"]}


def test_every_default_key_is_in_the_table() -> None:
    """Each key of HARL's ten algorithm files and eight env files has a row."""
    found = {f"{s}.{k}" for a in ALGOS for s, table in algo_defaults(a).items() for k in table}
    found |= {f"env:{e}.{k}" for e in ENVS for k in env_defaults(e)}
    assert sorted(found - set(keys.BY_PATH)) == []


def test_every_fixture_key_is_in_the_table() -> None:
    """Each key of the tuned-config fixtures has a row."""
    for path in sorted(DATA.glob("*.json")):
        assert sorted(_paths(json.loads(path.read_text())) - set(keys.BY_PATH)) == [], path.name


def test_counts() -> None:
    """The numbers docs/harl-compat.md gives."""
    assert keys.counts() == {"mapped": 94, "fixed": 14, "ignored": 7, "refused": 2}
