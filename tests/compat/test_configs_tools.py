"""harl.utils.configs_tools: HARL's defaults as data, and update_args with HARL's meaning."""

from __future__ import annotations

import pytest

from harl.errors import ConfigError
from harl.utils.configs_tools import get_defaults_yaml_args, update_args


class TestDefaults:
    def test_happo_mpe_values(self) -> None:
        """HARL's happo.yaml and pettingzoo_mpe.yaml, value for value where it matters."""
        algo, env = get_defaults_yaml_args("happo", "pettingzoo_mpe")
        assert env == {"scenario": "simple_spread_v2", "continuous_actions": True}
        assert algo["train"]["num_env_steps"] == 10_000_000
        assert algo["train"]["episode_length"] == 200
        assert algo["model"]["hidden_sizes"] == [128, 128]
        assert algo["model"]["opti_eps"] == 1e-5
        assert algo["algo"]["clip_param"] == 0.2
        assert algo["train"]["model_dir"] is None
        assert list(algo) == ["seed", "device", "train", "eval", "render", "model", "algo", "logger"]

    def test_hasac_defaults_differ_from_the_tuned_spread(self) -> None:
        """HARL's default hasac.yaml: fixed alpha 0.001, Huber loss, value norm (the tuned configs differ)."""
        algo, _ = get_defaults_yaml_args("hasac", "mamujoco")
        assert (algo["algo"]["alpha"], algo["algo"]["auto_alpha"], algo["algo"]["use_huber_loss"]) == (0.001, False, True)
        assert algo["train"]["use_valuenorm"] is True
        assert algo["train"]["num_env_steps"] == 20_000_000

    @pytest.mark.parametrize("algo", ["happo", "hatrpo", "haa2c", "mappo", "hasac", "hatd3", "haddpg", "had3qn",
                                      "maddpg", "matd3"])
    def test_every_algorithm(self, algo: str) -> None:
        """All ten algorithms have their defaults; each call gives a fresh copy."""
        first, _ = get_defaults_yaml_args(algo, "smac")
        first["train"]["n_rollout_threads"] = -1
        again, env = get_defaults_yaml_args(algo, "smac")
        assert again["train"]["n_rollout_threads"] in (10, 20)
        assert env == {"map_name": "2s_vs_1sc", "state_type": "FP"}

    def test_unknown_algo(self) -> None:
        with pytest.raises(ConfigError) as exc:
            get_defaults_yaml_args("hapo", "mamujoco")
        assert str(exc.value) == ('unknown HARL algorithm (--algo) "hapo" (HARL\'s are: happo, hatrpo, haa2c, '
                                  'haddpg, hatd3, hasac, had3qn, maddpg, matd3, mappo); did you mean "happo"?')

    def test_unknown_env(self) -> None:
        with pytest.raises(ConfigError) as exc:
            get_defaults_yaml_args("happo", "mpe")
        assert str(exc.value).startswith('unknown HARL environment (--env) "mpe" (HARL\'s are: smac, ')


class TestUpdateArgs:
    def test_sets_a_key_wherever_it_is(self) -> None:
        """HARL's meaning: a key sets every leaf of that name, at any depth, in every dict."""
        algo, env = get_defaults_yaml_args("happo", "pettingzoo_mpe")
        update_args({"num_env_steps": 20_000, "n_rollout_threads": 4, "cuda": False, "scenario": "simple_reference_v2"},
                    algo, env)
        assert algo["train"]["num_env_steps"] == 20_000
        assert algo["train"]["n_rollout_threads"] == 4
        assert algo["device"]["cuda"] is False
        assert env["scenario"] == "simple_reference_v2"

    def test_misspelt_key_is_not_dropped(self) -> None:
        """HARL drops an unknown override silently; harl says which key was meant."""
        algo, env = get_defaults_yaml_args("happo", "pettingzoo_mpe")
        with pytest.raises(ConfigError) as exc:
            update_args({"num_env_step": 20_000}, algo, env)
        assert str(exc.value) == ('--num_env_step: not a key of this algorithm\'s or environment\'s config; '
                                  'did you mean "--num_env_steps"?')
        assert algo["train"]["num_env_steps"] == 10_000_000
