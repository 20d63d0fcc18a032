"""RUNNER_REGISTRY and the runner classes: HARL's names, bases and method signatures."""

from __future__ import annotations

import inspect

import pytest

from harl.errors import ConfigError
from harl.runners import RUNNER_REGISTRY
from harl.runners.off_policy_base_runner import OffPolicyBaseRunner
from harl.runners.off_policy_ha_runner import OffPolicyHARunner
from harl.runners.off_policy_ma_runner import OffPolicyMARunner
from harl.runners.on_policy_base_runner import OnPolicyBaseRunner
from harl.runners.on_policy_ha_runner import OnPolicyHARunner
from harl.runners.on_policy_ma_runner import OnPolicyMARunner

HARL_REGISTRY = {
    "happo": OnPolicyHARunner, "hatrpo": OnPolicyHARunner, "haa2c": OnPolicyHARunner,
    "haddpg": OffPolicyHARunner, "hatd3": OffPolicyHARunner, "hasac": OffPolicyHARunner,
    "had3qn": OffPolicyHARunner, "maddpg": OffPolicyMARunner, "matd3": OffPolicyMARunner,
    "mappo": OnPolicyMARunner,
}

ON_POLICY = {"warmup": "()", "collect": "(step)", "insert": "(data)", "compute": "()", "prep_rollout": "()",
             "prep_training": "()", "train": "()", "after_update": "()", "eval": "()", "render": "()",
             "save": "()", "restore": "()", "dump_metrics_to_csv": "(metrics, eval_episode)", "close": "()",
             "run": "()"}
OFF_POLICY = {"warmup": "()", "get_actions": "(obs, available_actions=None, add_random=True)",
              "sample_actions": "(available_actions=None)", "insert": "(data)", "train": "()", "eval": "(step)",
              "render": "()", "save": "()", "restore": "()", "close": "()", "run": "()"}


def signature(cls: type, name: str) -> str:
    sig = inspect.signature(getattr(cls, name))
    params = [p.replace(annotation=inspect.Parameter.empty) for p in list(sig.parameters.values())[1:]]
    return str(sig.replace(parameters=params, return_annotation=inspect.Signature.empty))


def test_registry_maps_harls_ten_algorithms_to_the_four_classes() -> None:
    """The registry is HARL's, name for name."""
    assert dict(RUNNER_REGISTRY) == HARL_REGISTRY


def test_bases_are_the_seeds() -> None:
    """HA and MA runners derive from their family's base runner, which derives from object."""
    assert OnPolicyHARunner.__bases__ == (OnPolicyBaseRunner,) and OnPolicyMARunner.__bases__ == (OnPolicyBaseRunner,)
    assert OffPolicyHARunner.__bases__ == (OffPolicyBaseRunner,)
    assert OffPolicyMARunner.__bases__ == (OffPolicyBaseRunner,)
    assert OnPolicyBaseRunner.__bases__ == (object,) and OffPolicyBaseRunner.__bases__ == (object,)


def test_ha_and_ma_differ_by_the_updater_kind_only() -> None:
    """The one thing a concrete class sets is the updater kind."""
    assert OnPolicyHARunner.updater_kind == OffPolicyHARunner.updater_kind == "sequential"
    assert OnPolicyMARunner.updater_kind == OffPolicyMARunner.updater_kind == "simultaneous"


@pytest.mark.parametrize("cls", [OnPolicyHARunner, OnPolicyMARunner])
def test_on_policy_methods_have_the_seeds_signatures(cls: type) -> None:
    """Every on-policy method of the seed exists with its parameters."""
    assert {name: signature(cls, name) for name in ON_POLICY} == ON_POLICY


@pytest.mark.parametrize("cls", [OffPolicyHARunner, OffPolicyMARunner])
def test_off_policy_methods_have_the_seeds_signatures(cls: type) -> None:
    """Every off-policy method of the seed exists with its parameters."""
    assert {name: signature(cls, name) for name in OFF_POLICY} == OFF_POLICY


def test_unknown_algorithm_is_a_config_error_and_a_key_error() -> None:
    """An unknown name says the key, the choices and a near miss; callers catching KeyError still do."""
    with pytest.raises(ConfigError) as info:
        RUNNER_REGISTRY["hapo"]
    assert isinstance(info.value, KeyError)
    assert str(info.value) == (
        'args["algo"]: unknown algorithm "hapo" (did you mean "happo"?); harl.runners.RUNNER_REGISTRY has '
        "happo, hatrpo, haa2c, haddpg, hatd3, hasac, had3qn, maddpg, matd3, mappo; pass one of them as --algo")
    assert "hapo" not in RUNNER_REGISTRY and RUNNER_REGISTRY.get("hapo") is None
