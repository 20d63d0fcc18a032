"""harl.algorithms: one table names the algorithms, so the docs, the examples and the names
harl gives runs cannot drift from it."""

from __future__ import annotations

from pathlib import Path

import pytest
import tomllib

from harl.algorithms import (
    Algorithm,
    Kinds,
    algorithms,
    kinds_of,
    markdown_table,
    name_of,
    register_algorithm,
    rename,
)
from harl.config.dump import dump_pipeline
from harl.config.loading import load_spec_and_notes

ROOT = Path(__file__).parent.parent
README_ROWS = ("HAPPO", "HATRPO", "HAA2C", "MAPPO", "MAA2C", "IPPO", "IA2C", "MAT", "MAT-Dec", "Sable", "HASAC", "HATD3", "HADDPG", "HAD3QN",
               "MASAC", "MATD3", "MADDPG", "ISAC", "IDDPG", "ITD3", "IQL", "VDN", "QMIX", "PQN-VDN", "PQN-IQL")


def table_in(text: str) -> str:
    """The markdown table that starts with the generated header, as it stands in a document."""
    lines = text.splitlines()
    header = markdown_table().splitlines()[0]
    assert header in lines, "the generated table's header is missing"
    start = lines.index(header)
    end = start
    while end < len(lines) and lines[end].startswith("|"):
        end += 1
    return "\n".join(lines[start:end]) + "\n"


@pytest.mark.parametrize("doc", ["README.md", "docs/index.md", "docs/algorithms.md"])
def test_the_docs_hold_the_generated_table(doc: str) -> None:
    """Regenerate with harl.algorithms.markdown_table() when the table changes."""
    assert table_in((ROOT / doc).read_text(encoding="utf-8")) == markdown_table()


def test_the_table_names_the_readme_algorithms() -> None:
    assert [a.name for a in algorithms()] == list(README_ROWS)


@pytest.mark.parametrize("algorithm", algorithms(), ids=lambda a: a.name)
def test_each_example_is_its_algorithm(algorithm: Algorithm) -> None:
    """The example exists, its kinds (defaults filled in, as a run's pipeline.toml has them) are
    the entry's, and they name the entry back."""
    path = ROOT / algorithm.example
    assert path.is_file()
    spec, _ = load_spec_and_notes(path)
    written = tomllib.loads(dump_pipeline(spec))
    assert kinds_of(written) == algorithm.kinds
    assert (written["buffer"]["kind"], written["returns"]["kind"]) == (algorithm.buffer, algorithm.returns)
    assert name_of(kinds_of(written)) == algorithm.name
    assert name_of(kinds_of(tomllib.loads(path.read_text(encoding="utf-8")))) == algorithm.name


@pytest.mark.parametrize("algorithm", algorithms(), ids=lambda a: a.name)
def test_naming_round_trips(algorithm: Algorithm) -> None:
    assert name_of(algorithm.kinds) == algorithm.name


def test_unnamed_kinds_take_the_family_defaults() -> None:
    """A hand-written table without a critic kind: the family's default critic (MAPPO, not IPPO);
    a single SAC critic is still HASAC; kinds the table does not name: None."""
    assert name_of(Kinds("", "", False, "simultaneous", "ppo")) == "MAPPO"
    assert name_of(Kinds("", "", False, "sequential", "sac")) == "HASAC"
    assert name_of(Kinds("", "", False, "q_learning", "joint_td")) == "QMIX"
    assert name_of(Kinds("on_policy", "v", False, "simultaneous", "trpo")) is None


def test_rename_replaces_the_algorithm_word() -> None:
    mappo = Kinds("on_policy", "v", False, "simultaneous", "ppo")
    assert rename("happo-mpe-spread", mappo) == "mappo-mpe-spread"
    assert rename("mappo-mpe-spread", mappo) == "mappo-mpe-spread"
    assert rename("my-spread", mappo) == "my-spread"
    assert rename("hatrpo-spread", Kinds("on_policy", "v", False, "simultaneous", "trpo")) == "hatrpo-spread"


def test_a_new_algorithm_is_one_entry() -> None:
    """A name no entry has: registering harl's own "MAT" here replaced the shipped entry and the clean-up
    then deleted it, for every later test in the process (tests/mat/test_runs.py under pytest-xdist)."""
    before = algorithms()
    assert "MyTransformer" not in [a.name for a in before]
    mine = Algorithm("MyTransformer", "on_policy", "on_policy", "rollout", "gae", "mat_v", "simultaneous", "mat",
                     "a transformer", "pipelines/my_transformer.toml")
    register_algorithm(mine)
    try:
        assert name_of(mine.kinds) == "MyTransformer"
        assert "| MyTransformer " in markdown_table()
    finally:
        from harl import algorithms as module

        del module._ALGORITHMS["MyTransformer"]
    assert algorithms() == before


def test_harl_stages_families_lists_every_algorithm(capsys: pytest.CaptureFixture[str],
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """Each family's row names all of its algorithms in the table (IPPO, MASAC, ... included)."""
    from harl.cli import main

    monkeypatch.setenv("COLUMNS", "400")
    assert main(["stages", "families"]) == 0
    out = capsys.readouterr().out
    for family in ("on_policy", "off_policy", "value"):
        row = next(line for line in out.splitlines() if f" {family} " in line)
        assert ", ".join(a.name for a in algorithms(family)) in row
