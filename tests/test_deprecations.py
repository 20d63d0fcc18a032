"""Old public names still work until ``harl.errors.REMOVED_IN``, each with a DeprecationWarning
that names the new name and the release that removes it; harl's own code uses only the new ones."""

from __future__ import annotations

import re
import warnings
from pathlib import Path

import pytest

from harl.errors import REMOVED_IN, HarlDeprecationWarning

ROOT = Path(__file__).parent.parent


def test_removed_in_is_the_next_minor_version() -> None:
    """Bumping pyproject.toml's version past REMOVED_IN fails here: time to delete the old names."""
    version = re.search(r'^version = "(\d+)\.(\d+)', (ROOT / "pyproject.toml").read_text(), re.M)
    assert version is not None
    assert REMOVED_IN == f"harl {version[1]}.{int(version[2]) + 1}"


def test_the_warning_is_a_deprecation_warning() -> None:
    assert issubclass(HarlDeprecationWarning, DeprecationWarning)


def test_team_policy() -> None:
    from harl.policy import on_policy

    with pytest.warns(DeprecationWarning, match=rf"TeamPolicy is deprecated: use harl.policy.on_policy.OnPolicyActors "
                                                rf"\(.*removed in {REMOVED_IN}\)") as got:
        from harl.policy.on_policy import TeamPolicy
    assert TeamPolicy is on_policy.OnPolicyActors
    assert got[0].filename == __file__  # the warning points at the line that imports the old name


def test_off_policy_agent() -> None:
    from harl.update import off_policy

    with pytest.warns(DeprecationWarning, match=rf"use harl.update.off_policy.OffPolicyLearner .*{REMOVED_IN}") as got:
        agent = off_policy.OffPolicyAgent
    assert agent is off_policy.OffPolicyLearner and got[0].filename == __file__


def test_env_kinds() -> None:
    from harl.envs import registry as env_registry
    from harl.envs.mpe import MPEConfig, make_mpe_env
    from harl.envs.vmas_env import VMASConfig, make_vmas_vector_env

    with pytest.warns(DeprecationWarning, match=rf'ENV_KINDS is deprecated: use harl.registry.kinds\("env"\).*{REMOVED_IN}'):
        kinds = env_registry.ENV_KINDS
    assert kinds[MPEConfig] == ("mpe", make_mpe_env)
    assert kinds[VMASConfig] == ("vmas", env_registry.VectorFactory(make_vmas_vector_env))


def test_register_env_kind(monkeypatch: pytest.MonkeyPatch) -> None:
    import attrs

    from harl import registry
    from harl.envs.registry import VectorFactory, make_env, register_env_kind, vector_factory

    @attrs.frozen
    class OldConfig:
        kind: str = "tests.test_deprecations:OldConfig"

    @attrs.frozen
    class OldVectorConfig:
        kind: str = "tests.test_deprecations:OldVectorConfig"

    def make(config: OldConfig) -> str:
        return "an env"

    def make_batch(config: OldVectorConfig, n_envs: int, seed: int) -> str:
        return "a batch"

    monkeypatch.setattr(registry, "_BY_CLASS", dict(registry._BY_CLASS))  # these kinds go with the test
    with pytest.warns(DeprecationWarning, match=rf'register_env_kind\(Config, factory\) is deprecated: use '
                                                rf'harl.registry.register\("env", Config, factory\).*{REMOVED_IN}'):
        register_env_kind(OldConfig, make)
    with pytest.warns(DeprecationWarning, match="vectorised=True"):
        register_env_kind(OldVectorConfig, VectorFactory(make_batch))
    assert make_env(OldConfig()) == "an env" and vector_factory(OldVectorConfig()) is make_batch


def test_unknown_module_attributes_still_raise() -> None:
    from harl.envs import registry as env_registry
    from harl.policy import on_policy
    from harl.update import off_policy

    for module in (env_registry, on_policy, off_policy):
        with pytest.raises(AttributeError, match="has no attribute 'Nope'"):
            module.Nope  # noqa: B018


def test_stages_team() -> None:
    import torch

    from harl.compose import Stages

    policy = torch.nn.Linear(1, 1)
    stages = Stages(*[None] * 2, policy, *[None] * 7)  # type: ignore[arg-type]
    with pytest.warns(DeprecationWarning, match=rf"Stages.team is deprecated: use Stages.policy .*{REMOVED_IN}") as got:
        assert stages.team is policy
    assert got[0].filename == __file__  # the warning points at the line that reads the old name


@pytest.mark.parametrize(("key", "table", "name"), [
    ("mlflow_tracking_uri", "mlflow", "tracking_uri"), ("mlflow_experiment", "mlflow", "experiment"),
    ("wandb_project", "wandb", "project"), ("wandb_entity", "wandb", "entity"), ("wandb_mode", "wandb", "mode"),
    ("tracker_checkpoint", "mlflow", "checkpoint"),
])
def test_old_logging_keys_warn_once_and_still_work(monkeypatch: pytest.MonkeyPatch, key: str, table: str,
                                                   name: str) -> None:
    from harl.config import run

    monkeypatch.setattr(run, "_WARNED", set())
    value = True if key == "tracker_checkpoint" else "offline" if key == "wandb_mode" else "x"
    with pytest.warns(DeprecationWarning, match=rf"\[logging\] {key} is deprecated: use \[logging.{table}\] {name}"
                                                rf".*{REMOVED_IN}"):
        config = run.LoggingConfig(mlflow=True, wandb=True, **{key: value})
    assert getattr(getattr(config, table), name) == value and getattr(config, key) is None
    if key == "tracker_checkpoint":
        assert config.wandb.checkpoint is True
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        run.LoggingConfig(mlflow=True, wandb=True, **{key: value})  # once per process


def test_the_command_shows_them() -> None:
    """``harl`` shows a HarlDeprecationWarning raised inside harl (Python's default hides it)."""
    from harl.cli import main

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert main(["stages", "families"]) == 0
        assert any(f[0] == "default" and f[2] is HarlDeprecationWarning for f in warnings.filters)


OLD = {r"\bTeamPolicy\b": "harl/policy/on_policy.py", r"\bOffPolicyAgent\b": "harl/update/off_policy.py",
       r"\bENV_KINDS\b": "harl/envs/registry.py", r"\bregister_env_kind\b": "harl/envs/registry.py",
       r"\bstages\.team\b": "harl/compose.py", r"\bparts\.team\b": "harl/registry.py",
       r"\bOnPolicyTeam\b": "harl/policy/on_policy.py", r"\bOffPolicyTeam\b": "harl/policy/off_policy.py",
       r"\bAgentQTeam\b": "harl/policy/agent_q.py"}


def test_harl_uses_only_the_new_names() -> None:
    """Only the module that keeps an old name for users mentions it (docs/your-own-stage.md teaches the new)."""
    found = []
    for path in sorted((ROOT / "harl").rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        found += [f"{path.relative_to(ROOT)}: {old}" for old, home in OLD.items()
                  if str(path.relative_to(ROOT)) != home and re.search(old, text)]
    guide = (ROOT / "docs" / "your-own-stage.md").read_text(encoding="utf-8")
    found += [f"docs/your-own-stage.md: {old}" for old in OLD if re.search(old, guide)]
    assert found == []


# --------------------------------------------------------------------------- one vocabulary (issue 44)

def _pipeline(name: str) -> dict:  # type: ignore[type-arg]
    from harl.config.loading import read_toml

    return read_toml(ROOT / "pipelines" / name)


@pytest.mark.parametrize(("pipeline", "table", "old", "value", "new_table", "new", "expected"), [
    ("qmix_mpe_spread_discrete.toml", "updater", "tau", 0.05, "updater", "polyak", 0.05),
    ("ippo_lbf.toml", "critic", "target_tau", 0.02, "critic", "polyak", 0.02),
    ("had3qn_mpe_spread_discrete.toml", "updater.objective", "epsilon_end", 0.1, "collector",
     "epsilon_finish", 0.1),
    ("had3qn_mpe_spread_discrete.toml", "updater.objective", "epsilon_decay_steps", 700, "collector",
     "epsilon_anneal_steps", 700),
    ("qmix_mpe_spread_discrete.toml", "updater.objective", "hidden_dim", 32, "policy", "hidden_sizes", (32,)),
    ("qmix_mpe_spread_discrete.toml", "updater.objective", "recurrent", True, "policy", "recurrent", "naive"),
    ("qmix_mpe_spread_discrete.toml", "updater.objective", "share_parameters", False, "policy", "share_parameters",
     False),
    ("qmix_mpe_spread_discrete.toml", "updater.objective", "agent_id", False, "policy", "agent_id", False),
    ("qmix_mpe_spread_discrete.toml", "updater.objective", "last_action", True, "policy", "last_action", True),
])
def test_old_keys_warn_and_land_under_the_new_key(monkeypatch: pytest.MonkeyPatch, pipeline: str, table: str,
                                                  old: str, value: object, new_table: str, new: str,
                                                  expected: object) -> None:
    """A pipeline (or a run's pipeline.toml) of an older harl still loads: the old key warns once, naming
    the new key and REMOVED_IN, and the spec holds its value under the new key (the old one is gone)."""
    from functools import reduce

    from harl.config import renames
    from harl.config.dump import dump_pipeline
    from harl.config.loading import structure_pipeline

    monkeypatch.setattr(renames, "_WARNED", set())
    data = _pipeline(pipeline)
    holder = reduce(lambda d, k: d[k], table.split("."), data)
    new_holder = reduce(lambda d, k: d.setdefault(k, {}), new_table.split("."), data)
    new_holder.pop(new, None)  # the shipped pipeline says the new key: an old one's file would not
    holder[old] = value
    with pytest.warns(DeprecationWarning, match=rf"\[{re.escape(table)}\] {old} is deprecated: use "
                                                rf"\[{re.escape(new_table)}\] {new} .*{REMOVED_IN}"):
        spec = structure_pipeline(data, pipeline)
    assert getattr(reduce(getattr, new_table.split("."), spec), new) == expected
    assert f"\n{old} = " not in dump_pipeline(spec) or old == new
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        structure_pipeline(_pipeline(pipeline) | {}, pipeline)  # the new names: no warning


def test_an_old_key_and_its_new_one_that_disagree_are_refused() -> None:
    from harl.config.loading import structure_pipeline
    from harl.errors import ConfigError

    data = _pipeline("qmix_mpe_spread_discrete.toml")
    data["updater"]["objective"]["hidden_dim"] = 32
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(ConfigError, match=r"updater.objective.hidden_dim: the old spelling of policy.hidden_sizes, "
                                              r"which says \[64\]: write only policy.hidden_sizes = \[64\]"):
            structure_pipeline(data, "q.toml")


def test_a_set_of_the_old_key_overrides_the_files_new_one() -> None:
    from harl.config.loading import load_spec_and_notes

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        spec, _ = load_spec_and_notes(ROOT / "pipelines" / "qmix_mpe_spread_discrete.toml", ["updater.tau=0.2"])
    assert spec.updater.polyak == 0.2


def test_register_family_both(monkeypatch: pytest.MonkeyPatch) -> None:
    import attrs

    from harl import registry

    @attrs.frozen
    class AnyConfig:
        kind: str = "tests.test_deprecations:AnyConfig"

    monkeypatch.setattr(registry, "_BY_CLASS", dict(registry._BY_CLASS))
    with pytest.warns(DeprecationWarning, match=rf'family="both"\) is deprecated: use .*family="any"\).*{REMOVED_IN}'):
        entry = registry.register("sink", AnyConfig, None, family="both")
    assert entry.family == registry.ANY_FAMILY == "any" and entry.belongs_to("value")


def test_moved_classes_keep_their_old_import_paths() -> None:
    from harl.collect import on_policy, stats
    from harl.policy import config
    from harl.policy import on_policy as actors

    assert on_policy.CollectStats is stats.CollectStats and actors.PolicyConfig is config.PolicyConfig


def test_registry_parts() -> None:
    from harl import parts, registry

    with pytest.warns(DeprecationWarning, match=rf"harl.registry.Parts is deprecated: use harl.parts.Parts .*{REMOVED_IN}") as got:
        old = registry.Parts
    assert old is parts.Parts and got[0].filename == __file__
