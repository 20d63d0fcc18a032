"""harl.config: strict loading, overrides, messages, and the resolved dump."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import attrs
import pytest

from harl.config.dump import dump_pipeline
from harl.config.loading import load_spec_and_notes
from harl.config.messages import parse_value
from harl.errors import ConfigError, MissingExtraError
from harl.update.simultaneous import SimultaneousConfig
from tests.fakes import counting  # noqa: F401 - registers env kind "counting"

PIPELINES = sorted((Path(__file__).parents[2] / "pipelines").glob("*.toml"))
HAPPO = Path(__file__).parents[2] / "pipelines" / "happo_mpe_spread.toml"


def edited(tmp_path: Path, old: str, new: str, source: Path = HAPPO) -> Path:
    """A copy of ``source`` in tmp_path with one exact, present snippet replaced."""
    text = source.read_text(encoding="utf-8")
    assert text.count(old) == 1, f"{old!r} must occur once in {source.name}"
    path = tmp_path / "pipeline.toml"
    path.write_text(text.replace(old, new), encoding="utf-8")
    return path


def error_of(path: Path, overrides: tuple[str, ...] = ()) -> str:
    with pytest.raises(ConfigError) as info:
        load_spec_and_notes(path, overrides)
    return str(info.value)


def load_shipped(path: Path) -> tuple[Any, list[str]]:
    """A shipped pipeline, or a skip with harl's message where its env family's extra is absent."""
    try:
        return load_spec_and_notes(path)
    except MissingExtraError as exc:
        pytest.skip(str(exc))


class TestShippedPipelines:
    @pytest.mark.parametrize("path", PIPELINES, ids=lambda p: p.name)
    def test_loads(self, path: Path) -> None:
        """Every pipeline file in pipelines/ loads without notes; its name says its env kind."""
        spec, notes = load_shipped(path)
        assert notes == []
        task = path.stem.split("_", 1)[1]  # <algorithm>_<env kind>_<task>.toml, or a name the issue fixed:
        named = {"lbf": "gymma", "mpe_spread_jaxmarl": "mpe_torch"}  # EPyMARL's LBF; JaxMARL's settings
        assert task.startswith(spec.env.kind + "_") or named.get(task) == spec.env.kind

    @pytest.mark.parametrize("path", PIPELINES, ids=lambda p: p.name)
    def test_dump_round_trip(self, path: Path, tmp_path: Path) -> None:
        """The resolved dump of a pipeline loads back to an equal spec."""
        spec, _ = load_shipped(path)
        dumped = tmp_path / "resolved.toml"
        dumped.write_text(dump_pipeline(spec), encoding="utf-8")
        assert load_spec_and_notes(dumped)[0] == spec

    def test_dump_writes_lists_inline_and_nested_tables(self) -> None:
        """The dump keeps lists on one line and writes the objective as its own table."""
        text = dump_pipeline(load_spec_and_notes(HAPPO)[0])
        assert "hidden_sizes = [128, 128]\n" in text
        assert "total_env_steps = 10_000_000\n" in text
        assert '[updater]\nkind = "sequential"\norder = "random"\nlr_decay = "none"\ncompile = "off"\n\n[updater.objective]\n' in text

    def test_dump_leaves_out_unset_optional_keys(self, tmp_path: Path) -> None:
        """An optional key that is not set is left out of the dump (TOML has no null) and stays unset."""
        path = tmp_path / "counting.toml"
        path.write_text('[env]\nkind = "counting"\ncrash_at = 4\n[updater]\nkind = "simultaneous"\n')
        spec, _ = load_spec_and_notes(path)
        text = dump_pipeline(spec)
        assert '[env]\nkind = "counting"\nepisode_length = 3\ncrash_at = 4\n\n' in text
        path.write_text(text)
        assert load_spec_and_notes(path)[0] == spec and spec.env.terminate_at is None

    def test_there_are_shipped_pipelines(self) -> None:
        """The parametrised tests above are not vacuous."""
        assert len(PIPELINES) >= 3


class TestUnknownNames:
    def test_unknown_key_suggests_the_close_one(self, tmp_path: Path) -> None:
        """A misspelt key names its path, the likely key and every valid key."""
        path = edited(tmp_path, "clip = 0.2", "clipp = 0.2")
        assert error_of(path) == (
            f'{path}: updater.objective.clipp: unknown key (did you mean "clip"?); valid keys: '
            "action_aggregation, adam_eps, clip, entropy_coef, epochs, kind, lr, max_grad_norm, minibatches"
        )

    def test_unknown_key_without_close_match(self, tmp_path: Path) -> None:
        """A key like no valid one lists the valid keys without a guess."""
        path = edited(tmp_path, "seed = 1", "seed = 1\nbanana = 3")
        assert error_of(path) == (
            f"{path}: run.banana: unknown key; valid keys: device, name, population_update, precision, seed, torch_threads, total_env_steps"
        )

    def test_unknown_table(self, tmp_path: Path) -> None:
        """An unknown top-level table is named with the close table and all valid tables."""
        path = edited(tmp_path, "[critic]", "[critics]")
        assert error_of(path) == (
            f'{path}: critics: unknown table (did you mean "critic"?); valid tables: run, env, '
            "collector, buffer, returns, critic, updater, policy, evaluator, logging, checkpoint, teams"
        )

    def test_misspelt_teams_table(self, tmp_path: Path) -> None:
        """``[team.predators]`` (teams without its s) gets teams as its guess, and teams is listed."""
        path = edited(tmp_path, "[critic]", '[team.predators]\nagents = ["adversary_*"]\n\n[critic]')
        assert error_of(path) == (
            f'{path}: team: unknown table (did you mean "teams"?); valid tables: run, env, '
            "collector, buffer, returns, critic, updater, policy, evaluator, logging, checkpoint, teams"
        )

    def test_every_problem_is_reported(self, tmp_path: Path) -> None:
        """Two problems in different tables give two lines in one error."""
        path = edited(tmp_path, "lam = 0.95", "lam = 0.95\nlamb = 1")
        path.write_text(path.read_text().replace("n_envs = 20", "n_envs = 0"))
        assert error_of(path).splitlines() == [
            f"{path}: collector.n_envs: expected a value in (0, inf], got 0; "
            "for example n_envs = 20 (the default)",
            f'{path}: returns.lamb: unknown key (did you mean "lam"?); valid keys: gamma, kind, lam, '
            "proper_time_limits, zero_truncated_advantage",
        ]


class TestTypes:
    def test_float_for_integer(self, tmp_path: Path) -> None:
        """8.7 is not an integer (cattrs alone would truncate it to 8)."""
        path = edited(tmp_path, "n_envs = 20", "n_envs = 8.7")
        assert error_of(path) == (
            f"{path}: collector.n_envs: expected an integer, got 8.7; "
            "write a whole number, e.g. n_envs = 20 (the default)"
        )

    def test_quoted_boolean(self, tmp_path: Path) -> None:
        """The string "false" is not a boolean (cattrs alone would make it True)."""
        path = edited(tmp_path, "value_norm = true", 'value_norm = true\ninput_norm = "false"')
        assert error_of(path) == (
            f'{path}: critic.input_norm: expected a boolean (true or false), got "false"; '
            "remove the quotes: input_norm = false"
        )

    def test_string_for_number(self, tmp_path: Path) -> None:
        """A string that is no number is rejected where a number is expected."""
        path = edited(tmp_path, "clip = 0.2", 'clip = "0.2x"')
        assert error_of(path) == (
            f'{path}: updater.objective.clip: expected a number, got "0.2x"; '
            "write a number, e.g. clip = 0.2 (the default)"
        )

    def test_boolean_for_integer(self, tmp_path: Path) -> None:
        """true is not the integer 1."""
        path = edited(tmp_path, "n_envs = 20", "n_envs = true")
        assert error_of(path) == (
            f"{path}: collector.n_envs: expected an integer, got true; "
            "write a whole number, e.g. n_envs = 20 (the default)"
        )

    def test_number_for_string(self, tmp_path: Path) -> None:
        """A bare number where a string is expected is rejected with the quoted form."""
        path = edited(tmp_path, 'name = "happo-mpe-spread"', "name = 12")
        assert error_of(path) == f'{path}: run.name: expected a string, got 12; quote it: name = "12"'

    def test_boolean_inside_integer_list(self, tmp_path: Path) -> None:
        """A list of integers may not hold a boolean."""
        path = edited(tmp_path, 'hidden_sizes = [128, 128]\nactivation = "relu"',
                      'hidden_sizes = [128, true]\nactivation = "relu"')
        assert error_of(path) == (
            f"{path}: policy.hidden_sizes: expected a list of integers, got [128, true]; "
            "write a list of whole numbers, e.g. hidden_sizes = [128, 128] (the default)"
        )

    def test_wrong_type_for_an_optional_key(self, tmp_path: Path) -> None:
        """An optional key (no default) is advised to be written right or left out."""
        path = tmp_path / "counting.toml"
        path.write_text('[env]\nkind = "counting"\nterminate_at = 2.5\n[updater]\nkind = "simultaneous"\n')
        assert error_of(path) == (
            f"{path}: env.terminate_at: expected an integer, got 2.5; write a whole number, "
            "or leave terminate_at out (it is not set by default)"
        )

    def test_value_for_table(self, tmp_path: Path) -> None:
        """A slot written as a plain value asks for a table."""
        path = edited(tmp_path, '[buffer]\nkind = "rollout"\n', "")
        path.write_text("buffer = 3\n" + path.read_text())
        assert error_of(path) == f"{path}: buffer: expected a table, got 3; write it as a [buffer] table"

    def test_integer_for_float_is_accepted(self, tmp_path: Path) -> None:
        """gamma = 1 is a valid number and becomes the float 1.0."""
        spec, _ = load_spec_and_notes(edited(tmp_path, "gamma = 0.99", "gamma = 1"))
        assert spec.returns.gamma == 1.0 and isinstance(spec.returns.gamma, float)


class TestKindsAndRanges:
    def test_unknown_kind_lists_the_kinds(self, tmp_path: Path) -> None:
        """An unknown kind names the valid kinds and the close one."""
        path = edited(tmp_path, 'kind = "gae"', 'kind = "gea"')
        assert error_of(path) == (
            f'{path}: returns.kind: unknown kind "gea" (expected one of: gae, n_step_v, n_step, episode_td, q_lambda, or "module:Name" of your own); did you mean "gae"?'
        )

    def test_unknown_kind_of_a_nested_slot(self, tmp_path: Path) -> None:
        """The objective, a table inside [updater], is dispatched on its kind too."""
        path = edited(tmp_path, 'kind = "ppo"', 'kind = "ppoo"')
        assert error_of(path) == (
            f'{path}: updater.objective.kind: unknown kind "ppoo" (expected one of: ppo, a2c, mat, mat_dec, sable, trpo, '
            'd3qn, ddpg, sac, td3, joint_td, pqn_q, or "module:Name" of your own); did you mean "ppo"?'
        )

    def test_clip_out_of_range(self, tmp_path: Path) -> None:
        """clip must lie in (0, 1]; the message gives the interval and the default."""
        path = edited(tmp_path, "clip = 0.2", "clip = 2.0")
        assert error_of(path) == (
            f"{path}: updater.objective.clip: expected a value in (0, 1], got 2.0; "
            "for example clip = 0.2 (the default)"
        )

    def test_gamma_out_of_range(self, tmp_path: Path) -> None:
        """gamma must lie in [0, 1]."""
        path = edited(tmp_path, "gamma = 0.99", "gamma = 1.5")
        assert error_of(path) == (
            f"{path}: returns.gamma: expected a value in [0, 1], got 1.5; "
            "for example gamma = 0.99 (the default)"
        )

    def test_chunk_length_must_divide_the_rollout(self, tmp_path: Path) -> None:
        """Chunked recurrent training cuts each rollout into whole chunks; the message proposes a divisor."""
        path = edited(tmp_path, 'activation = "relu"\nshare_parameters',
                      'activation = "relu"\nrecurrent = "chunked"\nchunk_length = 15\nshare_parameters')
        assert error_of(path) == (
            f"{path}: policy.chunk_length: expected a divisor of collector.rollout_length (200), "
            "got 15; for example chunk_length = 10"
        )

    def test_sequential_updater_with_a_shared_actor(self, tmp_path: Path) -> None:
        """A sequential update needs one actor per agent, so a shared actor is refused."""
        path = edited(tmp_path, "share_parameters = false", "share_parameters = true")
        assert error_of(path) == (
            f'{path}: updater.kind: "sequential" updates agents one after another, which needs one '
            "actor per agent, but policy.share_parameters = true makes one actor for all; set "
            'policy.share_parameters = false, or updater.kind = "simultaneous"'
        )


class TestFiles:
    def test_malformed_toml_gives_line_and_column(self, tmp_path: Path) -> None:
        """A syntax error names the file, line, column and the line itself."""
        path = edited(tmp_path, "gamma = 0.99", "gamma = =")
        line = path.read_text().splitlines().index("gamma = =") + 1
        assert error_of(path) == (
            f'{path}: malformed TOML at line {line}, column 9: invalid value in "gamma = ="'
        )

    def test_malformed_toml_at_the_end(self, tmp_path: Path) -> None:
        """An unclosed list at the end of the file says so."""
        path = tmp_path / "open.toml"
        path.write_text("[run]\nseed = [1,\n")
        assert error_of(path) == f"{path}: malformed TOML at the end of the file: invalid value"

    def test_missing_file(self, tmp_path: Path) -> None:
        """A missing file is named and the shipped pipelines are pointed to."""
        path = tmp_path / "nope.toml"
        shipped = HAPPO.parent.resolve()
        assert error_of(path) == f"{path}: no such pipeline file; the shipped ones are in {shipped}"

    def test_missing_file_from_another_folder(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        """Run from a folder without pipelines/, a shipped pipeline's name still finds it, by absolute path."""
        monkeypatch.chdir(tmp_path)
        shipped = HAPPO.parent.resolve()
        assert error_of(Path("pipelines/happo_mpe_sprad.toml")) == (
            f"pipelines/happo_mpe_sprad.toml: no such pipeline file; did you mean {shipped / 'happo_mpe_spread.toml'}, "
            f"{shipped / 'mappo_mpe_spread.toml'} or {shipped / 'hatrpo_mpe_spread.toml'}?"
        )
        assert error_of(Path("pipelines/zzzz.toml")).endswith(f"the shipped ones are in {shipped}")

    def test_misspelt_file_did_you_mean(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        """A misspelt name gets the closest pipeline files of its folder, best first."""
        monkeypatch.chdir(HAPPO.parents[1])
        assert error_of(Path("pipelines/happo_mpe_sprad.toml")) == (
            "pipelines/happo_mpe_sprad.toml: no such pipeline file; did you mean "
            "pipelines/happo_mpe_spread.toml, pipelines/mappo_mpe_spread.toml or "
            "pipelines/hatrpo_mpe_spread.toml?"
        )
        for name in ("mine.toml", "other.toml", "notes.txt"):
            (tmp_path / name).write_text("")
        assert error_of(tmp_path / "mnie.toml") == (
            f"{tmp_path / 'mnie.toml'}: no such pipeline file; did you mean {tmp_path / 'mine.toml'}?"
        )
        assert error_of(tmp_path / "other") == (
            f"{tmp_path / 'other'}: no such pipeline file; did you mean {tmp_path / 'other.toml'}?"
        )

    def test_misspelt_folder_did_you_mean(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """A folder that does not exist: the closest files in pipelines/."""
        monkeypatch.chdir(HAPPO.parents[1])
        assert error_of(Path("pipeline/happo_smax_3m.toml")) == (
            "pipeline/happo_smax_3m.toml: no such pipeline file; did you mean "
            "pipelines/happo_smax_3m.toml, pipelines/mappo_smax_3m.toml or pipelines/ippo_smax_3m.toml?"
        )

    def test_binary_file(self, tmp_path: Path) -> None:
        """A file that is not UTF-8 text is refused without a traceback."""
        path = tmp_path / "model.pt"
        path.write_bytes(b"\x80\x81\xff")
        assert error_of(path) == f"{path}: not a pipeline file (it is not UTF-8 text)"


class TestOverrides:
    def test_malformed_override(self) -> None:
        """An override without '=' is refused with an example."""
        assert error_of(HAPPO, ("foo",)) == (
            "--set foo: expected KEY=VALUE with a dotted key path, e.g. --set run.seed=3"
        )

    def test_override_with_empty_key_part(self) -> None:
        """A key path with an empty part is malformed."""
        assert error_of(HAPPO, ("run..seed=3",)) == (
            "--set run..seed=3: expected KEY=VALUE with a dotted key path, e.g. --set run.seed=3"
        )

    def test_override_with_a_bad_value(self) -> None:
        """A bad --set value is reported at its key path, naming the --set and a --set fix."""
        assert error_of(HAPPO, ("run.seed=abc",)) == (
            f'{HAPPO}: run.seed (from --set run.seed=abc): expected an integer, got "abc"; '
            "write a whole number, e.g. --set run.seed=1 (the default)"
        )

    def test_override_out_of_range(self) -> None:
        """A --set value out of range gets the range and a --set example."""
        assert error_of(HAPPO, ("updater.objective.clip=2",)) == (
            f"{HAPPO}: updater.objective.clip (from --set updater.objective.clip=2): expected a value "
            "in (0, 1], got 2.0; for example --set updater.objective.clip=0.2 (the default)"
        )

    def test_override_of_an_unknown_key(self) -> None:
        """A misspelt --set key gets the close key."""
        assert error_of(HAPPO, ("run.sed=3",)) == (
            f'{HAPPO}: run.sed (from --set run.sed=3): unknown key (did you mean "seed"?); '
            "valid keys: device, name, population_update, precision, seed, torch_threads, total_env_steps"
        )

    def test_override_below_a_value(self) -> None:
        """A --set cannot put a key inside a value."""
        assert error_of(HAPPO, ("run.seed.x=1",)) == (
            '--set run.seed.x=1: run.seed is a value (1), not a table, so it has no key "x"; '
            "set it with --set run.seed=VALUE"
        )

    def test_number_for_string_override_is_quoted_for_the_shell(self) -> None:
        """The fix for a number given as a name is a shell-quoted TOML string."""
        assert error_of(HAPPO, ("run.name=123",)) == (
            f"{HAPPO}: run.name (from --set run.name=123): expected a string, got 123; "
            "quote it: --set 'run.name=\"123\"'"
        )

    def test_switch_to_simultaneous_drops_order(self) -> None:
        """Switching HAPPO to the simultaneous updater drops its `order` with a note."""
        spec, notes = load_spec_and_notes(HAPPO, ["updater.kind=simultaneous"])
        assert isinstance(spec.updater, SimultaneousConfig)
        assert spec.updater.objective.clip == 0.2
        assert notes == [
            "--set updater.kind=simultaneous: dropped updater.order, which kind 'simultaneous' does not have"
        ]

    def test_values_reach_the_spec(self) -> None:
        """Overrides of every value type land in the spec; the rest of the file is kept."""
        spec, notes = load_spec_and_notes(HAPPO, [
            "run.total_env_steps=2_000_000", "policy.hidden_sizes=[64,64]", "run.name=my-run",
            "updater.objective.lr=1e-3", "logging.progress=false", 'env.scenario="simple_reference"',
        ])
        assert notes == []
        assert spec.run.total_env_steps == 2_000_000
        assert spec.policy.hidden_sizes == (64, 64)
        assert spec.run.name == "my-run"
        assert spec.updater.objective.lr == 1e-3
        assert spec.logging.progress is False
        assert spec.env.scenario == "simple_reference"
        base, _ = load_spec_and_notes(HAPPO)
        assert spec.critic == base.critic and spec.collector == base.collector

    def test_later_override_wins(self) -> None:
        """The last --set of a key is the one that counts."""
        spec, _ = load_spec_and_notes(HAPPO, ["run.seed=3", "run.seed=4"])
        assert spec.run.seed == 4

    def test_override_does_not_touch_the_file(self, tmp_path: Path) -> None:
        """Overrides change the loaded spec, never the pipeline file."""
        path = edited(tmp_path, "seed = 1", "seed = 1")
        before = path.read_text()
        load_spec_and_notes(path, ["run.seed=9"])
        assert path.read_text() == before

    @pytest.mark.parametrize(("raw", "value"), [
        ("3", 3), ("2_000_000", 2_000_000), ("0.5", 0.5), ("1e-3", 1e-3), ("true", True),
        ("[64,64]", [64, 64]), ("[64, 64]", [64, 64]), ('"3"', "3"), ("'x y'", "x y"),
        ("simple_spread", "simple_spread"), ("my run", "my run"), ("", ""),
        ("2024-01-01", "2024-01-01"), ("{clip = 0.1}", {"clip": 0.1}),
    ])
    def test_value_parsing(self, raw: str, value: object) -> None:
        """A --set value is a TOML literal, and anything else is taken as a bare-word string."""
        parsed = parse_value(raw)
        assert parsed == value and type(parsed) is type(value)

    def test_bare_word_is_not_a_boolean(self) -> None:
        """`False` (capitalised) is not TOML, so it is a string, and a boolean key refuses it."""
        assert error_of(HAPPO, ("logging.progress=False",)) == (
            f'{HAPPO}: logging.progress (from --set logging.progress=False): expected a boolean '
            '(true or false), got "False"; write true or false without quotes, e.g. '
            "--set logging.progress=true (the default)"
        )


def test_specs_are_frozen() -> None:
    """A loaded spec cannot be changed in place; overrides go through attrs.evolve."""
    spec, _ = load_spec_and_notes(HAPPO)
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        spec.run.seed = 5  # type: ignore[misc]
