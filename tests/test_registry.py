"""harl.registry: kinds found by slot, users' kinds by "module:Name" and entry points, and
every way a user's stage can be wrong reported as one located line (exit 2)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import attrs
import pytest

from harl import api, registry
from harl.cli import main
from harl.compose import build_stages
from harl.config.dump import dump_pipeline
from harl.config.loading import parse_toml, structure_pipeline
from harl.envs.vector import make_vector_env
from harl.errors import ConfigError
from tests.fakes import counting, user_stages

ROOT = Path(__file__).parent.parent
M = "tests.fakes.user_stages"


def spec_of(data: dict[str, Any]) -> Any:
    assert counting.CountingConfig and user_stages.ScaledReturnsConfig  # register the fakes
    return structure_pipeline({"env": {"kind": "counting"}, **data}, "x.toml")


def message(data: dict[str, Any]) -> str:
    with pytest.raises(ConfigError) as info:
        spec_of(data)
    return str(info.value)


def returns(kind: str, **keys: Any) -> dict[str, Any]:
    return {"returns": {"kind": kind, **keys}}


class TestHarlKinds:
    def test_each_slot_lists_its_kinds_default_first(self) -> None:
        """Slot tables are derived from the modules that register themselves."""
        expected = {
            "collector": ["on_policy", "off_policy"], "buffer": ["rollout", "replay"],
            "returns": ["gae", "n_step"], "critic": ["v", "joint_q", "q"],
            "updater": ["sequential", "simultaneous"],
            "updater.objective": ["ppo", "a2c", "trpo", "d3qn", "ddpg", "sac", "td3"],
        }
        names = {slot: [e.kind for e in registry.kinds(slot) if e.kind in expected[slot]] for slot in expected}
        assert names == expected  # the default first, then on-policy kinds, then off-policy, by name

    def test_families_and_requirements(self) -> None:
        """The off-policy family and the critic each objective needs are entry data."""
        assert registry.of_family("updater.objective", "off_policy") == ["d3qn", "ddpg", "sac", "td3"]
        requires = {e.kind: dict(e.requires) for e in registry.kinds("updater.objective")}
        assert requires["d3qn"] == {"critic": "joint_q_values"} and requires["sac"] == {"critic": "q_values"}
        assert registry.providers("critic", "state_values", "on_policy")[0] == "v"
        assert "v" not in registry.providers("critic", "state_values", "off_policy")

    def test_a_registration_outside_the_slots_is_refused(self) -> None:
        with pytest.raises(ValueError, match="no stage slot 'policy'"):
            registry.register("policy", user_stages.UnregisteredConfig, None)

    def test_env_kinds_are_registered_by_their_adapters(self) -> None:
        """Each adapter module registers its kind at its bottom; mpe is the default; VMAS builds a whole vector env."""
        names = [e.kind for e in registry.kinds("env")]
        assert names[0] == "mpe"
        assert {"mpe", "mamujoco", "gym", "vmas", "python", "smax", "mpe_torch", "football", "air_combat",
                "pettingzoo", "gymma"} <= set(names)
        by_kind = {e.kind: e for e in registry.kinds("env")}
        assert by_kind["vmas"].module == "harl.envs.vmas_env" and by_kind["vmas"].parts == {"vectorised": True}
        assert by_kind["mpe"].module == "harl.envs.mpe" and by_kind["mpe"].parts == {}

    def test_listing_env_kinds_imports_no_simulator(self) -> None:
        """Finding the env kinds imports every adapter, and so none may import its optional package at the top."""
        code = ("import sys; from harl import registry; registry.kinds('env'); "
                "print(sorted(m for m in ('mpe2', 'vmas', 'jax', 'jaxmarl', 'gfootball', 'jsbsim', 'mujoco', "
                "'pettingzoo', 'gymnasium_robotics', 'ray', 'lbforaging', 'rware') if m in sys.modules))")
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
        assert out.stdout.strip() == "[]"

    def test_families_are_registered_like_kinds(self) -> None:
        """compose holds no table of families: each module of harl/families registers its own, and a
        pipeline's family is its collector kind's."""
        from harl.families import on_policy

        names = [f.name for f in registry.families()]
        assert names[:2] == ["on_policy", "off_policy"]
        assert registry.family("on_policy") is on_policy.FAMILY
        assert registry.family_of(spec_of({}).collector) is on_policy.FAMILY
        with pytest.raises(KeyError, match="no family 'nope' is registered; known: on_policy, off_policy"):
            registry.family("nope")
        with pytest.raises(ValueError, match="a family needs a name other than 'any'"):
            registry.register_family(attrs.evolve(on_policy.FAMILY, name="any"))

    def test_a_sink_registers_like_any_kind(self) -> None:
        """The sink slot takes harl's sinks and a user's: found by name and by "module:Name", checked for write/close."""
        entry = registry.resolve("sink", f"{M}:PrintSinkConfig")
        assert entry is not None and entry.slot == "sink" and entry.config is user_stages.PrintSinkConfig
        assert "print" in [e.kind for e in registry.kinds("sink")]
        with pytest.raises(ConfigError, match="lacks close: a sink stage needs write, close"):
            registry.check_protocol(entry, type("HalfSink", (), {"write": lambda self, row: None})(), "x.toml: sink")

    def test_slot_protocols_name_what_the_registry_checks(self) -> None:
        """``harl.protocols``' members and ``registry.PROTOCOLS`` agree, so the type checker and the
        build-time check ask a user's stage for the same things."""
        from harl.protocols import SLOT_PROTOCOLS

        for slot, protocol in SLOT_PROTOCOLS.items():
            members = {n for n in vars(protocol) if not n.startswith("_")}
            assert members == set(registry.PROTOCOLS[slot]), slot


class TestBadUserStages:
    """Each case is one line naming the file, the key and the fix."""

    @pytest.mark.parametrize("data, expected", [
        (returns("no_such_pkg.returns:TDLambda"),
         'returns.kind: "no_such_pkg.returns:TDLambda": cannot import module "no_such_pkg.returns" (No module '
         "named 'no_such_pkg'); it must be importable from sys.path or the current directory"),
        (returns(f"{M}:ScaledReturnConfig"),
         f'returns.kind: "{M}:ScaledReturnConfig": module "{M}" has no attribute "ScaledReturnConfig" '
         '(did you mean "ScaledReturnsConfig"?)'),
        (returns(f"{M}:"), f'returns.kind: "{M}:": expected "module:Name", e.g. "my_pkg.returns:TDLambdaConfig"'),
        (returns("tests.fakes.broken_stage:Anything"),
         'returns.kind: "tests.fakes.broken_stage:Anything": importing "tests.fakes.broken_stage" failed: '
         "RuntimeError: this module is broken on purpose"),
        (returns(f"{M}:NotAttrs"),
         f'returns.kind: "{M}:NotAttrs" is not an attrs class (got type); a stage\'s config is an '
         "@attrs.frozen class registered with harl.registry.register"),
        (returns(f"{M}:register"),
         f'returns.kind: "{M}:register" is not an attrs class (got function); a stage\'s config is an '
         "@attrs.frozen class registered with harl.registry.register"),
        (returns(f"{M}:UnregisteredConfig"),
         f'returns.kind: "{M}:UnregisteredConfig": UnregisteredConfig is not registered as a stage; call '
         'harl.registry.register("returns", UnregisteredConfig, factory, family=...) in its module'),
        (returns(f"{M}:UserCriticConfig"),
         f'returns.kind: "{M}:UserCriticConfig" is registered for [critic], not [returns]'),
        ({"updater": {"objective": {"kind": f"{M}:ScaledReturnsConfig"}}},
         f'updater.objective.kind: "{M}:ScaledReturnsConfig" is registered for [returns], not [updater.objective]'),
        (returns(f"{M}:ScaledReturnsConfig", scal=2.0),
         'returns.scal: unknown key (did you mean "scale"?); valid keys: horizon, label, scale'),
        (returns(f"{M}:ScaledReturnsConfig", scale="2.0"),
         'returns.scale: expected a number, got "2.0"; remove the quotes: scale = 2.0'),
        (returns(f"{M}:ScaledReturnsConfig", horizon=2.5),
         "returns.horizon: expected an integer, got 2.5; write a whole number, e.g. horizon = 5 (the default)"),
        (returns(f"{M}:ScaledReturnsConfig", scale=-1.0),
         "returns.scale: expected a value in [0, inf], got -1.0; for example scale = 1.0 (the default)"),
        (returns(f"{M}:ScaledReturnsConfig", label=3),
         'returns.label: expected a string, got 3; quote it: label = "3"'),
        ({**returns(f"{M}:ScaledReturnsConfig"), "collector": {"kind": "off_policy"}, "buffer": {"kind": "replay"},
          "critic": {"kind": "q"}, "updater": {"objective": {"kind": "sac"}}},
         f'returns.kind: "{M}:ScaledReturnsConfig" belongs to the on-policy family, but collector.kind = '
         '"off_policy"; set returns.kind = "n_step" (or collector.kind = "on_policy")'),
        (returns("td_lamda"),
         'returns.kind: unknown kind "td_lamda" (expected one of: gae, n_step_v, n_step, episode_td, q_lambda, or '
         '"module:Name" of your own); did you mean "q_lambda"?'),
    ], ids=["missing module", "missing name", "empty name", "import raises", "not attrs", "not a class",
            "unregistered", "wrong slot", "wrong nested slot", "unknown key", "quoted number", "float for int",
            "out of range", "number for string", "wrong family", "unknown name"])
    def test_message(self, data: dict[str, Any], expected: str) -> None:
        assert message(data) == f"x.toml: {expected}"

    @pytest.mark.parametrize("kind, expected", [
        ("tests.fakes.user_stage:ScaledReturnsConfig",
         'cannot import module "tests.fakes.user_stage" (No module named \'tests.fakes.user_stage\'); '
         f'did you mean "{M}:ScaledReturnsConfig"?'),
        ("tests.fakse.user_stages:ScaledReturnsConfig",
         'cannot import module "tests.fakse.user_stages" (No module named \'tests.fakse\'); '
         f'did you mean "{M}:ScaledReturnsConfig"?'),
        ("tets.fakes.user_stages:ScaledReturnsConfig",
         'cannot import module "tets.fakes.user_stages" (No module named \'tets\'); '
         f'did you mean "{M}:ScaledReturnsConfig"?'),
    ], ids=["module", "package", "top-level in the current directory"])
    def test_misspelt_module_did_you_mean(self, kind: str, expected: str, monkeypatch: pytest.MonkeyPatch) -> None:
        """A misspelt module path is answered with the closest existing one, as a whole kind to paste."""
        monkeypatch.chdir(ROOT)
        assert message(returns(kind)) == f'x.toml: returns.kind: "{kind}": {expected}'

    def test_a_stage_without_its_protocol_is_refused_at_build(self) -> None:
        """A factory whose stage lacks ``compute`` is named with the slot's protocol."""
        spec = spec_of(returns(f"{M}:NoComputeConfig"))
        with pytest.raises(ConfigError) as info:
            build_stages(spec, "x.toml")
        assert str(info.value) == (
            f'x.toml: returns.kind: "{M}:NoComputeConfig" built a object, which lacks compute: a returns '
            "stage needs compute (see docs/your-own-stage.md)")

    def test_cli_exits_2_without_a_traceback(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        path = tmp_path / "p.toml"
        path.write_text('[returns]\nkind = "tests.fakes.user_stages:NotAttrs"\n', encoding="utf-8")
        assert main(["check", str(path)]) == 2
        err = capsys.readouterr().err
        assert err.startswith(f'harl: {path}: returns.kind: "tests.fakes.user_stages:NotAttrs" is not an attrs')
        assert "Traceback" not in err


class TestUserKinds:
    def test_validated_and_written_back_with_the_kind_the_file_used(self) -> None:
        """A user's config round-trips through the resolved pipeline (what --resume reads)."""
        spec = spec_of(returns(f"{M}:ScaledReturnsConfig", scale=0.5))
        assert spec.returns == user_stages.ScaledReturnsConfig(scale=0.5)
        text = dump_pipeline(spec)
        assert f'[returns]\nkind = "{M}:ScaledReturnsConfig"\nscale = 0.5\nhorizon = 5\nlabel = "x"\n' in text
        assert structure_pipeline(parse_toml(text, "r.toml"), "r.toml") == spec

    def test_a_failed_build_closes_the_envs_it_was_given(self) -> None:
        """Pre-built vector envs are owned by the build: a failure closes them too."""
        spec = spec_of(returns(f"{M}:NoComputeConfig"))
        closed = []

        class Recording:
            def __init__(self, venv: Any) -> None:
                self.venv = venv

            def __getattr__(self, name: str) -> Any:
                return getattr(self.venv, name)

            def close(self) -> None:
                closed.append(self)
                self.venv.close()

        venvs = [Recording(make_vector_env(spec.env, n, "inline", seed=0)) for n in (2, 1)]
        with pytest.raises(ConfigError):
            build_stages(spec, "x.toml", venv=venvs[0], eval_venv=venvs[1])
        assert closed == venvs

    def test_listed_by_module_path(self) -> None:
        """harl stages pkg.mod:Name lists a user's kind like harl's own, in its registered slot."""
        assert api.stage_kinds(f"{M}:ScaledReturnsConfig") == [(
            "returns", f"{M}:ScaledReturnsConfig", user_stages.ScaledReturnsConfig, [
                ("scale", "number", "1.0", "factor on every advantage"),
                ("horizon", "integer", "5", "unused; an integer key to type-check"),
                ("label", "string", '"x"', "unused; a string key to type-check"),
            ])]
        slot, kind, cls, keys = api.stage_kinds(f"{M}:UserCriticConfig")[0]
        assert (slot, kind, cls, keys) == ("critic", f"{M}:UserCriticConfig", user_stages.UserCriticConfig, [])

    def test_listed_by_the_cli(self, capsys: pytest.CaptureFixture[str]) -> None:
        assert main(["stages", f"{M}:ScaledReturnsConfig"]) == 0
        out = capsys.readouterr().out.splitlines()
        assert out[0] == f'[returns] kind = "{M}:ScaledReturnsConfig"'
        assert out[4:7] == ["│ scale   │ number  │ 1.0     │ factor on every advantage            │",
                            "│ horizon │ integer │ 5       │ unused; an integer key to type-check │",
                            '│ label   │ string  │ "x"     │ unused; a string key to type-check   │']
        assert out[-1] == "GAE advantages times scale."

    @pytest.mark.parametrize("kind, expected", [
        (f"{M}:NotAttrs",
         f'"{M}:NotAttrs" is not a stage\'s config: a stage\'s config is an @attrs.frozen class registered with '
         "harl.registry.register(slot, Config, factory, family=...) in its module"),
        (f"{M}:UnregisteredConfig",
         f'"{M}:UnregisteredConfig" is not a stage\'s config: a stage\'s config is an @attrs.frozen class '
         "registered with harl.registry.register(slot, Config, factory, family=...) in its module"),
        (f"{M}:ScaledReturnConfig",
         f'"{M}:ScaledReturnConfig": module "{M}" has no attribute "ScaledReturnConfig" '
         '(did you mean "ScaledReturnsConfig"?)'),
        ("tests.fakes.counting:CountingConfig",
         '"tests.fakes.counting:CountingConfig" is registered for [env], which takes no "module:Name" kind'),
    ], ids=["not attrs", "unregistered", "missing name", "env"])
    def test_not_listable(self, kind: str, expected: str, capsys: pytest.CaptureFixture[str]) -> None:
        assert main(["stages", kind]) == 2
        assert capsys.readouterr().err == f"harl: harl stages: {expected}\n"


@pytest.fixture(scope="module")
def installed_stage_package(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """tests/fakes/entry_point_pkg installed into a directory of its own (the venv is not touched)."""
    work = tmp_path_factory.mktemp("entry_point")
    shutil.copytree(ROOT / "tests" / "fakes" / "entry_point_pkg", work / "src")
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation",
                    "--no-index", "--target", str(work / "site"), str(work / "src")], check=True)
    return work / "site"


def harl_cli(site: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {"PYTHONPATH": f"{site}:{ROOT}", "PATH": "/usr/bin:/bin", "COLUMNS": "200"}
    return subprocess.run([sys.executable, "-m", "harl", *args], capture_output=True, text=True, env=env,
                          cwd=ROOT)


class TestEntryPoints:
    def test_harl_stages_lists_an_installed_packages_kind(self, installed_stage_package: Path) -> None:
        """`harl stages` shows the entry point's kind with its keys and doc."""
        out = harl_cli(installed_stage_package, "stages", "half_gae")
        assert out.returncode == 0, out.stderr
        assert '[returns] kind = "half_gae"' in out.stdout
        assert "factor on every advantage" in out.stdout and "GAE whose advantages are scaled by scale" in out.stdout

    def test_a_pipeline_uses_it_by_name(self, installed_stage_package: Path) -> None:
        out = harl_cli(installed_stage_package, "check", "examples/custom_env.toml", "--set", "returns.kind=half_gae",
                       "--set", "returns.scale=0.25")
        assert out.returncode == 0, out.stderr
        assert "half_gae" in out.stdout and "scale=0.25" in out.stdout
