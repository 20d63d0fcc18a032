"""harl.compat.convert: HARL's configs become harl's own HARL-faithful pipelines, and bad input
is one paragraph naming the file and the key."""

from __future__ import annotations

import copy
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from harl.compat import convert, pipeline_from_harl
from harl.config.dump import dump_pipeline
from harl.config.loading import load_spec_and_notes, parse_toml, structure_pipeline
from harl.errors import ConfigError
from harl.utils.configs_tools import get_defaults_yaml_args

DATA = Path(__file__).parent / "data"
PIPELINES = Path(__file__).parent.parent.parent / "pipelines"

HAPPO_SPREAD = [
    # what HARL's default happo/pettingzoo_mpe config implies beyond the shipped pipeline
    "env.variant=pettingzoo_1.22", "returns.zero_truncated_advantage=true", "run.torch_threads=4",
    "evaluator.counting=first_finished", "run.name=installtest",
    "logging.dir=results/pettingzoo_mpe/simple_spread_v2-continuous/happo",
    # the shipped pipeline's own choice (speed; the results are the same)
    "collector.backend=inline",
]
HASAC_SPREAD = [
    "env.variant=pettingzoo_1.22", "run.torch_threads=4", "evaluator.counting=first_finished", "run.name=report",
    "logging.dir=results/pettingzoo_mpe/simple_spread_v2-continuous/hasac",
    "run.total_env_steps=10_010_000",   # HARL's budget counts after the 10k warm-up
    "evaluator.every_iterations=200",   # HARL: every 10,000 vector steps = 200 rounds of 50
    "checkpoint.every_iterations=50",   # harl's default; the shipped pipeline keeps fewer
    'updater.objective.squash="act_limit"', "buffer.replacement=false",  # HARL's; the shipped pipeline keeps harl's
]
HAPPO_CHEETAH = [
    "returns.zero_truncated_advantage=true", "run.torch_threads=4", "evaluator.counting=first_finished",
    "run.name=report", "logging.dir=results/mamujoco/HalfCheetah-v2-2x3/happo",
    "critic.value_clip=0.05",           # HARL's V critic clips with clip_param; the shipped pipeline keeps 0.2
    'env.observation="harl"', "env.clip_actions=false",  # HARL's MaMuJoCo; the shipped pipeline keeps local
]


def _fixture(name: str) -> dict[str, Any]:
    return json.loads((DATA / name).read_text())


class TestEquivalence:
    """The converter reproduces harl's shipped HARL-faithful pipelines, up to listed keys."""

    def test_default_happo_mpe(self) -> None:
        """HARL's default happo + pettingzoo_mpe = happo_mpe_spread.toml plus HAPPO_SPREAD."""
        algo_args, env_args = get_defaults_yaml_args("happo", "pettingzoo_mpe")
        converted = pipeline_from_harl("happo", "pettingzoo_mpe", None, algo_args, env_args)
        shipped, _ = load_spec_and_notes(PIPELINES / "happo_mpe_spread.toml", HAPPO_SPREAD)
        assert dump_pipeline(converted.spec()) == dump_pipeline(shipped)

    def test_tuned_happo_mpe_equals_default(self) -> None:
        """HARL's tuned simple_spread happo config is its defaults (learning-parity.md says so)."""
        tuned = convert(DATA / "pettingzoo_mpe_simple_spread_v2-continuous_happo.json").spec()
        shipped, _ = load_spec_and_notes(PIPELINES / "happo_mpe_spread.toml", [*HAPPO_SPREAD, "run.name=report"])
        assert dump_pipeline(tuned) == dump_pipeline(shipped)

    def test_tuned_hasac_mpe(self) -> None:
        """HARL's tuned simple_spread hasac = hasac_mpe_spread.toml plus HASAC_SPREAD."""
        converted = convert(DATA / "pettingzoo_mpe_simple_spread_v2-continuous_hasac.json")
        shipped, _ = load_spec_and_notes(PIPELINES / "hasac_mpe_spread.toml", HASAC_SPREAD)
        assert dump_pipeline(converted.spec()) == dump_pipeline(shipped)
        objective = converted.pipeline["updater"]["objective"]
        assert (objective["alpha"], objective["auto_alpha"], converted.pipeline["critic"]["huber_delta"],
                converted.pipeline["critic"]["value_norm"]) == (0.2, True, 0.0, False)

    def test_tuned_happo_halfcheetah(self) -> None:
        """HARL's tuned HalfCheetah-2x3 happo = happo_mamujoco_halfcheetah_2x3.toml plus HAPPO_CHEETAH."""
        converted = convert(DATA / "mamujoco_HalfCheetah-v2-2x3_happo.json")
        shipped, _ = load_spec_and_notes(PIPELINES / "happo_mamujoco_halfcheetah_2x3.toml", HAPPO_CHEETAH)
        assert dump_pipeline(converted.spec()) == dump_pipeline(shipped)

    def test_toml_round_trip(self) -> None:
        """to_toml() reads back as the same spec."""
        converted = convert(DATA / "mamujoco_Hopper-v2-3x1_hatd3.json")
        again = structure_pipeline(parse_toml(converted.to_toml(), "x.toml"), "x.toml")
        assert dump_pipeline(again) == dump_pipeline(converted.spec())


class TestMapping:
    @pytest.mark.parametrize("name", sorted(p.name for p in DATA.glob("*.json") if "corridor" not in p.name
                                            and "smacv2" not in p.name))
    def test_fixture_converts(self, name: str) -> None:
        """Every runnable fixture converts to a valid pipeline."""
        assert convert(DATA / name).spec() is not None

    def test_off_policy_numbers(self) -> None:
        """Ant-4x2-like numbers: budget plus warm-up, update_per_train x train_interval, eval in rounds."""
        algo_args, env_args = get_defaults_yaml_args("hatd3", "mamujoco")
        algo_args["train"]["update_per_train"] = 0.5
        p = pipeline_from_harl("hatd3", "mamujoco", {"exp_name": "t"}, algo_args, env_args).pipeline
        assert p["run"]["total_env_steps"] == 10_010_000
        assert p["collector"] == {"kind": "off_policy", "n_envs": 10, "rollout_length": 50, "updates_per_round": 25,
                                  "warmup_steps": 10_000}
        assert p["evaluator"]["every_iterations"] == 200
        assert p["critic"]["twin"] is True and p["updater"]["objective"]["policy_freq"] == 2
        assert p["env"] == {"kind": "mamujoco", "scenario": "Walker2d", "agent_conf": "6x1", "agent_obsk": 0,
                            "max_episode_steps": 1000, "observation": "harl", "clip_actions": False}

    def test_had3qn(self) -> None:
        """HAD3QN's dueling keys and epsilon."""
        p = convert(DATA / "pettingzoo_mpe_simple_spread_v2-discrete_had3qn.json").pipeline
        assert p["critic"]["kind"] == "joint_q" and p["critic"]["dueling_activation"] == "hardswish"
        assert (p["collector"]["epsilon_start"], p["collector"]["epsilon_finish"]) == (0.05, 0.05)
        assert p["collector"]["epsilon_coin"] == "per_step"  # HARL's one coin per vector step
        assert not any(key.startswith("epsilon") for key in p["updater"]["objective"])
        assert p["returns"] == {"kind": "n_step", "gamma": 0.95, "n_step": 1, "proper_time_limits": True}

    def test_mappo_shares_and_has_no_order(self) -> None:
        p = convert(DATA / "mamujoco_Walker2d-v2-6x1_mappo.json").pipeline
        assert p["updater"] == {"kind": "simultaneous", "lr_decay": "none", "objective": p["updater"]["objective"]}
        assert p["policy"]["share_parameters"] is True

    def test_overrides_and_seed(self) -> None:
        """HARL's --key value overrides; seed_specify false draws a seed and says so."""
        c = convert(DATA / "pettingzoo_mpe_simple_spread_v2-continuous_happo.json",
                    {"num_env_steps": 20_000, "n_rollout_threads": 4, "cuda": False, "seed_specify": False})
        assert (c.pipeline["run"]["total_env_steps"], c.pipeline["collector"]["n_envs"]) == (20_000, 4)
        assert c.pipeline["run"]["device"] == "cpu"
        assert 1000 <= c.pipeline["run"]["seed"] < 10_000
        assert any(n.startswith("seed.seed_specify is false: seed ") for n in c.notes)

    def test_smax_note(self) -> None:
        """A SMAC map SMAX has runs there, with one line that says so."""
        c = convert(DATA / "smac_5m_vs_6m_hasac.json")
        assert c.pipeline["env"] == {"kind": "smax", "scenario": "5m_vs_6m"}
        assert c.pipeline["critic"]["state_type"] == "FP"
        assert ('smac: StarCraft II cannot be installed from the package registries: map "5m_vs_6m" runs on SMAX '
                "(jaxmarl's JAX rebuild of SMAC, against its heuristic AI); win rates are SMAX's, not SMAC's") in c.notes

    def test_ignored_keys_are_one_note(self) -> None:
        c = convert(DATA / "pettingzoo_mpe_simple_spread_v2-continuous_happo.json")
        assert c.notes == ("ignored (docs/harl-compat.md): device.cuda_deterministic (harl sets no cuDNN flags: "
                           "its CPU runs are reproducible from the seed; on CUDA set "
                           "torch.backends.cudnn.deterministic yourself); train.log_interval (harl logs every "
                           "iteration to metrics.csv and its progress display); render.render_episodes (used only "
                           "by HARL's render mode; harl render --episodes N films a run)",)


class TestBadInput:
    def _happo(self) -> dict[str, Any]:
        return copy.deepcopy(_fixture("pettingzoo_mpe_simple_spread_v2-continuous_happo.json"))

    def _error(self, config: Any, overrides: dict[str, Any] | None = None) -> str:
        with pytest.raises(ConfigError) as exc:
            convert(config, overrides)
        return str(exc.value)

    def test_not_json(self, tmp_path: Path) -> None:
        bad = tmp_path / "config.json"
        bad.write_text("algo = 'happo'\n")
        assert self._error(bad) == (
            f"{bad}: not a HARL config: it is not JSON (Expecting value at line 1, column 1); HARL's config.json "
            "holds main_args, algo_args and env_args. A harl pipeline (.toml) runs with harl train directly")

    def test_wrong_type(self) -> None:
        config = self._happo()
        config["algo_args"]["model"]["lr"] = "fast"
        assert self._error(config) == 'HARL config: algo_args.model.lr: expected a number, got "fast"'

    def test_misspelt_key(self) -> None:
        config = self._happo()
        config["algo_args"]["train"]["num_env_step"] = 5
        assert self._error(config) == ('HARL config: algo_args.train.num_env_step: not a key of HARL\'s config; '
                                       'did you mean "num_env_steps"?')

    def test_misspelt_override(self) -> None:
        assert self._error(self._happo(), {"num_env_step": 5}) == (
            '--num_env_step: not a key of this algorithm\'s or environment\'s config; did you mean "--num_env_steps"?')

    def test_unknown_algo(self) -> None:
        config = self._happo()
        config["main_args"]["algo"] = "hapo"
        assert self._error(config) == (
            'HARL config: main_args.algo: unknown HARL algorithm "hapo" (HARL\'s are: happo, hatrpo, haa2c, haddpg, '
            'hatd3, hasac, had3qn, maddpg, matd3, mappo); did you mean "happo"?')

    def test_pair_harl_cannot_run(self) -> None:
        algo_args, env_args = get_defaults_yaml_args("had3qn", "mamujoco")
        with pytest.raises(ConfigError) as exc:
            pipeline_from_harl("had3qn", "mamujoco", None, algo_args, env_args)
        assert str(exc.value) == (
            "HARL's had3qn/mamujoco config: main_args.algo: had3qn needs discrete actions, and mamujoco "
            "Walker2d-v2-6x1 has continuous (Box) ones; use hasac, hatd3 or haddpg (continuous), or an on-policy "
            "algorithm")

    def test_model_dir_without_checkpoint(self, tmp_path: Path) -> None:
        config = self._happo()
        config["algo_args"]["train"]["model_dir"] = str(tmp_path)
        assert self._error(config) == (
            f"HARL config: algo_args.train.model_dir: {tmp_path} holds no harl checkpoint (checkpoints/iter_N.pt). "
            "harl starts from a harl run directory or one of its checkpoint files "
            "(runs/<run>/checkpoints/iter_N.pt); HARL's own actor_agent*.pt / critic_agent*.pt files do not fit "
            "harl's networks. Set model_dir to a harl run, or to null to start from fresh networks")

    def test_fixed_value_refused(self) -> None:
        config = self._happo()
        config["algo_args"]["model"]["weight_decay"] = 0.01
        assert self._error(config) == ("HARL config: algo_args.model.weight_decay: harl supports only 0 here "
                                       "(harl's Adam optimisers have no weight decay), not 0.01")

    def test_range_names_the_harl_key(self) -> None:
        config = self._happo()
        config["algo_args"]["train"]["n_rollout_threads"] = 0
        assert self._error(config) == (
            "HARL config: collector.n_envs: expected a value in (0, inf], got 0; for example n_envs = 20 "
            "(the default) (converted from HARL's train.n_rollout_threads)")

    def test_smac_map_without_smax(self) -> None:
        message = self._error(DATA / "smac_corridor_happo.json")
        assert message.startswith(f'{DATA / "smac_corridor_happo.json"}: env_args.map_name: smac needs StarCraft II')
        assert "SMAX's maps: 3m, 8m, 25m, 2s3z, 3s5z, 5m_vs_6m, 10m_vs_11m, 27m_vs_30m, 3s5z_vs_3s6z" in message

    def test_dexhands(self) -> None:
        algo_args, env_args = get_defaults_yaml_args("happo", "dexhands")
        with pytest.raises(ConfigError, match="^HARL's happo/dexhands config: env dexhands: HARL's dexhands"):
            pipeline_from_harl("happo", "dexhands", None, algo_args, env_args)


@pytest.mark.skipif(sys.platform != "linux", reason="the CLI runs in a subprocess")
def test_same_metrics_as_the_shipped_pipeline(tmp_path: Path) -> None:
    """Two iterations, same seed: the converted default happo config and the shipped pipeline with
    HAPPO_SPREAD write the same metrics.csv (wall-clock columns aside)."""
    import csv
    import os
    import subprocess

    algo_args, env_args = get_defaults_yaml_args("happo", "pettingzoo_mpe")
    converted = tmp_path / "converted.toml"
    converted.write_text(pipeline_from_harl("happo", "pettingzoo_mpe", None, algo_args, env_args).to_toml())
    small = ["run.total_env_steps=800", "collector.n_envs=4", "collector.rollout_length=100",
             "evaluator.n_envs=2", "evaluator.episodes=2", "run.torch_threads=1"]
    env = {**os.environ, "PYTHONPATH": str(PIPELINES.parent)}

    def train(pipeline: Path, overrides: list[str], out: str) -> list[dict[str, str]]:
        sets = [a for o in [*overrides, *small] for a in ("--set", o)]
        subprocess.run([sys.executable, "-m", "harl", "train", str(pipeline), *sets, "--run-dir",
                        str(tmp_path / out), "--quiet"], check=True, env=env, cwd=tmp_path)
        with open(tmp_path / out / "metrics.csv") as f:
            return [{k: v for k, v in row.items() if k not in ("wall_time", "steps_per_s")} for row in csv.DictReader(f)]

    ours = train(converted, [], "converted")
    shipped = train(PIPELINES / "happo_mpe_spread.toml", HAPPO_SPREAD, "shipped")
    assert len(ours) == 2
    assert ours == shipped
