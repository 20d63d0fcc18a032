"""harl.tune.space: a search space file, validated like a pipeline (file, line, key, fix); no optuna needed."""

from __future__ import annotations

from pathlib import Path

import pytest

from harl.errors import ConfigError
from harl.tune.space import read_space

ROOT = Path(__file__).resolve().parents[2]
HAPPO = ROOT / "pipelines" / "happo_mpe_spread.toml"


def _space(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "space.toml"
    path.write_text(text, encoding="utf-8")
    return path


def _error(tmp_path: Path, text: str) -> str:
    with pytest.raises(ConfigError) as info:
        read_space(_space(tmp_path, text), HAPPO)
    return str(info.value)


def test_a_space_reads_with_its_defaults_and_conditions(tmp_path: Path) -> None:
    space = read_space(_space(tmp_path, '''
[params]
"updater.objective.lr" = { log_uniform = [1e-4, 1e-3] }
"updater.objective.epochs" = { int = [2, 8], step = 2 }
"policy.hidden_sizes" = { categorical = [[64, 64], [128, 128]] }
"updater.objective.kind" = { categorical = ["ppo", "a2c"] }
"updater.objective.clip" = { uniform = [0.1, 0.3], when = { "updater.objective.kind" = "ppo" } }

[objective]
statistic = "iqm"
'''), HAPPO)
    assert [p.key for p in space.params][-1] == "updater.objective.clip"
    assert space.params[-1].when == (("updater.objective.kind", ("ppo",)),)
    assert (space.statistic, space.last, space.pruner, space.sampler, space.seed) == ("iqm", 3, "median", "tpe", 0)
    assert space.params[0].describe() == "log_uniform [0.0001, 0.001]"


@pytest.mark.parametrize(("text", "expected"), [
    ('[params]\n"updater.objective.lrr" = { uniform = [0.1, 0.3] }\n',
     ':2: [params] "updater.objective.lrr": 0.1 does not go into the pipeline: '),
    ('[params]\n\n"updater.objective.lr" = { uniform = [0.3, 0.1] }\n',
     ':3: [params] "updater.objective.lr": the range [0.3, 0.1] is inverted; write it low first: uniform = [0.1, 0.3]'),
    ('[params]\n"updater.objective.lr" = { uniform = [0.3, 0.3] }\n',
     ":2: [params] \"updater.objective.lr\": the range [0.3, 0.3] is empty; a key with one value is not searched: "
     "set it with --set updater.objective.lr=0.3"),
    ('[params]\n"policy.hidden_sizes" = { categorical = [[64, 64]] }\n',
     ':2: [params] "policy.hidden_sizes": categorical needs two choices or more, got [[64, 64]]'),
    ('[params]\n"updater.objective.lr" = { loguniform = [1e-4, 1e-3] }\n',
     ':2: [params] "updater.objective.lr": unknown key "loguniform" (did you mean "log_uniform"?)'),
    ('[params]\n"updater.objective.lr" = { log_uniform = [0, 1e-3] }\n',
     "log_uniform needs a positive low bound, got 0; use uniform for a range that reaches 0 or below"),
    ('[params]\n"updater.objective.epochs" = { int = [2.5, 8] }\n', "int expects two integers, got [2.5, 8]"),
    ('[params]\n"updater.objective.clip" = { uniform = [0.1, 0.3], when = { "updater.objective.kind" = "ppo" } }\n',
     'when: "updater.objective.kind" is not a categorical parameter above this one'),
    ('[params]\n"updater.objective.lr" = { uniform = [1e-4, 1e-3] }\n[pruner]\nkind = "hyperband"\n',
     ':4: pruner.kind: expected one of "median", "halving", "none", got "hyperband"'),
    ('[params]\n"updater.objective.lr" = { uniform = [1e-4, 1e-3] }\n[objectiv]\nlast = 2\n',
     'space.toml:3: [objectiv]: unknown table (did you mean "objective"?)'),
    ("[objective]\nlast = 2\n", "no parameter to search"),
])
def test_bad_spaces_are_one_line_each_naming_file_line_key_and_fix(tmp_path: Path, text: str, expected: str) -> None:
    message = _error(tmp_path, text)
    assert message.startswith(str(tmp_path / "space.toml")), message
    assert expected in message, message
    assert "\n" not in message


def test_a_value_the_pipeline_refuses_is_named_with_the_pipelines_words(tmp_path: Path) -> None:
    message = _error(tmp_path, '[params]\n"updater.objective.lrr" = { log_uniform = [1e-4, 1e-3] }\n')
    assert 'updater.objective.lrr: unknown key (did you mean "lr"?)' in message
    assert "--set" not in message  # the space's value, not a --set the user never gave
    message = _error(tmp_path, '[params]\n"updater.objective.epochs" = { int = [0, 5] }\n')
    assert ':2: [params] "updater.objective.epochs": 0 does not go into the pipeline' in message


def test_a_conditional_key_is_checked_under_its_condition(tmp_path: Path) -> None:
    """A key that exists only for one objective (trpo's kl_threshold) is valid under its condition."""
    space = read_space(_space(tmp_path, '''
[params]
"updater.objective.kind" = { categorical = ["ppo", "trpo"] }
"updater.objective.kl_threshold" = { log_uniform = [0.001, 0.05], when = { "updater.objective.kind" = "trpo" } }
'''), HAPPO)
    assert len(space.params) == 2
