"""harl.sizes: runaway sizes are refused with numbers before anything big is allocated."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest
from gymnasium import spaces

from harl import sizes
from harl.cli import main
from harl.errors import ResourceError

ROOT = Path(__file__).parents[1]
HAPPO = ROOT / "pipelines" / "happo_mpe_spread.toml"
HASAC = ROOT / "pipelines" / "hasac_mpe_spread.toml"
GIB = 1 << 30


@pytest.fixture
def eight_gib(monkeypatch: pytest.MonkeyPatch) -> None:
    """The machine has 8 GiB available, whatever it really has (messages and limits are fixed)."""
    monkeypatch.setattr(sizes, "available_bytes", lambda device="cpu": 8 * GIB)
    monkeypatch.setattr("harl.envs.footprint.available_bytes", lambda device="cpu": 8 * GIB)


def error(args: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    started = time.monotonic()
    assert main(args) == 2
    assert time.monotonic() - started < 60  # refused before building a billion of anything
    return capsys.readouterr().err


@pytest.mark.usefixtures("eight_gib")
class TestRefused:
    def test_collector_envs(self, capsys: pytest.CaptureFixture[str]) -> None:
        """collector.n_envs = 10**9: envs measured (resident memory), with the rollout buffer and /dev/shm."""
        err = error(["check", str(HAPPO), "--set", "collector.n_envs=1_000_000_000"], capsys)
        assert re.match(
            rf"harl: {HAPPO}: collector.n_envs = 1,000,000,000 and evaluator.n_envs = 10: 1,000,000,010 "
            r"environments of about [\d.]+ [kM]B each \(3 built and measured, native memory included\) \([\d.]+ [TP]B\); "
            r"collector.n_envs = 1,000,000,000 x \(collector.rollout_length = 200 \+ 1\) steps: the rollout buffer", err), err
        assert "need about" in err and "together, but 8.6 GB of memory is available (cpu)" in err
        assert err.endswith("lower collector.n_envs (and evaluator.n_envs) (nothing was built)\n") or \
            "the subprocess backend's shared memory" in err, err

    def test_evaluator_envs(self, capsys: pytest.CaptureFixture[str]) -> None:
        """evaluator.n_envs = 10**9 is refused the same way."""
        err = error(["check", str(HAPPO), "--set", "evaluator.n_envs=1_000_000_000"], capsys)
        assert "collector.n_envs = 20 and evaluator.n_envs = 1,000,000,000: 1,000,000,020 environments" in err

    def test_rollout_length(self, capsys: pytest.CaptureFixture[str]) -> None:
        """rollout_length = 10**9: the rollout buffer's exact size per env step, times the steps, refused."""
        err = error(["check", str(HAPPO), "--set", "collector.rollout_length=1_000_000_000"], capsys)
        assert err == (
            f"harl: {HAPPO}: collector.n_envs = 20 x (collector.rollout_length = 1,000,000,000 + 1) steps: the "
            "rollout buffer (598 bytes per env step, 12.0 TB) and the update's batches (23.9 TB) would need about "
            "23.9 TB, but 8.6 GB of memory is available (cpu); lower collector.rollout_length or collector.n_envs "
            "(nothing was built)\n")

    def test_replay_capacity(self, capsys: pytest.CaptureFixture[str]) -> None:
        """buffer.capacity = 10**12 is refused with bytes per transition x capacity."""
        err = error(["check", str(HASAC), "--set", "buffer.capacity=1_000_000_000_000"], capsys)
        assert err == (
            f"harl: {HASAC}: buffer.capacity = 1,000,000,000,000: the replay buffer (950 bytes per transition x "
            "1,000,000,000,000 transitions, 950.0 TB) would need about 950.0 TB, but 8.6 GB of memory is available "
            "(cpu); lower buffer.capacity (nothing was built)\n")

    def test_train_refuses_too(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        """harl train refuses before making a run directory."""
        err = error(["train", str(HASAC), "--set", "buffer.capacity=100_000_000", "--set",
                     f'logging.dir="{tmp_path}"'], capsys)
        assert "would need about 95.0 GB, but 8.6 GB" in err
        assert list(tmp_path.iterdir()) == []


ISSUE_CASE = ["--set", "collector.n_envs=100000", "--set", "collector.rollout_length=100000"]
"""Issue 38's case: envs that pass alone (at the old 65.5 kB floor) and a rollout buffer checked too late."""


@pytest.fixture
def watched(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts the training envs built (a refusal must come before the first)."""
    from harl.envs import vector

    built: list[int] = []
    make = vector.make_vector_env

    def counted(env_config: object, n_envs: int, *args: object, **kwargs: object) -> object:
        built.append(n_envs)
        return make(env_config, n_envs, *args, **kwargs)

    monkeypatch.setattr(vector, "make_vector_env", counted)
    monkeypatch.setattr("harl.compose.make_vector_env", counted)
    return built


@pytest.mark.usefixtures("eight_gib")
class TestIssueCase:
    """Every size at once, before the first allocation, from every entry point."""

    @pytest.mark.parametrize("backend", ["subprocess", "inline"])
    def test_check_and_train(self, backend: str, tmp_path: Path, watched: list[int],
                             capsys: pytest.CaptureFixture[str]) -> None:
        for command in ("check", "train"):
            err = error([command, str(HAPPO), *ISSUE_CASE, "--set", f'collector.backend="{backend}"', "--set",
                         f'logging.dir="{tmp_path}"'], capsys)
            assert err.startswith(
                f"harl: {HAPPO}: collector.n_envs = 100,000 x (collector.rollout_length = 100,000 + 1) steps: the "
                "rollout buffer (598 bytes per env step, 6.0 TB) and the update's batches (12.0 TB); collector.n_envs "
                "= 100,000 and evaluator.n_envs = 10: 100,010 environments of about "), err
            assert "(3 built and measured, native memory included)" in err
            assert "together, but 8.6 GB of memory is available (cpu)" in err
            assert err.endswith("lower collector.rollout_length or collector.n_envs (nothing was built)\n")
            assert err.count("\n") == 1
        assert watched == [] and list(tmp_path.iterdir()) == []

    def test_envs_counted_with_native_memory(self) -> None:
        """An mpe2 env's render surfaces (about 2 MB) count: tracemalloc alone saw about 18 kB."""
        pytest.importorskip("mpe2")
        from harl.config.loading import parse_toml, structure_pipeline
        from harl.envs.footprint import probe

        spec = structure_pipeline(parse_toml(HAPPO.read_text(), str(HAPPO)), str(HAPPO))
        _, per_env = probe(spec.env, 3)
        assert per_env > 500_000, per_env

    def test_python_api(self, tmp_path: Path, watched: list[int]) -> None:
        import harl

        with pytest.raises(ResourceError, match="together, but 8.6 GB of memory is available"):
            harl.train(HAPPO, [*ISSUE_CASE[1::2], f'logging.dir="{tmp_path}"'])
        with pytest.raises(ResourceError, match="together, but 8.6 GB of memory is available"):
            harl.build(HAPPO, ISSUE_CASE[1::2])
        assert watched == [] and list(tmp_path.iterdir()) == []

    def test_runner_facade(self, tmp_path: Path, watched: list[int]) -> None:
        from harl.runners import RUNNER_REGISTRY
        from tests.runners.dicts import harl_dicts, on_policy

        with pytest.raises(ResourceError, match="collector.rollout_length = 100,000"):
            RUNNER_REGISTRY["happo"](*harl_dicts(tmp_path, "happo"), pipeline=on_policy(n_envs=100_000, length=100_000))
        assert watched == []


def test_shm_refused(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """The subprocess backend's segment against /dev/shm (a container's 64 MB): refused with the fix."""
    from harl.envs import footprint

    monkeypatch.setattr(footprint, "shm_free", lambda path="/dev/shm": 64 * 1000 * 1000)
    err = error(["check", str(HAPPO), "--set", "collector.n_envs=200_000", "--set", "collector.rollout_length=2",
                 "--set", "evaluator.n_envs=1"], capsys)
    assert re.search(r"the subprocess backend's shared memory for collector.n_envs = 200,000 needs about "
                     r"[\d.]+ MB, but /dev/shm has 64.0 MB free \(containers often cap it at 64 MB: give the "
                     r"container more, e.g. docker run --shm-size=1g, or set collector.backend = \"inline\"\)", err), err
    monkeypatch.setattr(footprint, "shm_free", lambda path="/dev/shm": 10**12)
    monkeypatch.setattr(sizes, "available_bytes", lambda device="cpu": 10**15)
    monkeypatch.setattr(footprint, "available_bytes", lambda device="cpu": 10**15)
    footprint.check_sizes(_spec(HAPPO, "collector.n_envs=200_000", "collector.rollout_length=2"), "p")


def _spec(path: Path, *overrides: str) -> object:
    import harl

    return harl.load_pipeline(path, overrides)


def test_check_prints_replay_memory(capsys: pytest.CaptureFixture[str]) -> None:
    """harl check announces the replay buffer's memory when full: bytes per transition x capacity."""
    assert main(["check", str(HASAC), "--set", "collector.n_envs=2", "--set", "evaluator.n_envs=2"]) == 0
    out = " ".join(capsys.readouterr().out.replace("│", " ").split())
    assert "capacity 1,000,000, batch 1000; memory when full: 950 bytes per transition x 1,000,000 = 950.0 MB" in out


def test_replay_bytes_by_hand() -> None:
    """2 agents: obs 3 and 5, Discrete(4) and Box(2), state 6: per transition 4 bytes x (2x8 obs + 2x4 masks
    + (1 + 2) actions + 2x6 state + 2x2 rewards/active) + 2 bool bytes = 4 x 43 + 2 = 174."""
    obs = [spaces.Box(-1, 1, (3,)), spaces.Box(-1, 1, (5,))]
    acts = [spaces.Discrete(4), spaces.Box(-1, 1, (2,))]
    assert sizes.replay_bytes_per_transition(obs, acts, 6) == 174


def test_allocation_failure_is_a_harl_error() -> None:
    """An allocator failure that slips past the estimate is a ResourceError, not a traceback."""
    with pytest.raises(ResourceError, match="^p.toml: out of memory while building the buffers"):
        with sizes.allocating("the buffers", "p.toml"):
            raise RuntimeError("DefaultCPUAllocator: not enough memory: you tried to allocate 1 TB")
    with pytest.raises(RuntimeError, match="shape"):
        with sizes.allocating("the buffers", "p.toml"):
            raise RuntimeError("shape mismatch")


def test_human() -> None:
    assert [sizes.human(n) for n in (999, 1000, 950_000_000, 2.5e15)] == ["999 B", "1.0 kB", "950.0 MB", "2.5 PB"]


def test_gpu_buffers_against_the_device() -> None:
    """Buffers on a GPU are compared with the device's free memory, the envs with the host's."""
    from harl.envs.footprint import Item, refusal

    items = [Item("the environments", 4 * 10**9, "collector.n_envs"),
             Item("the rollout buffer", 30 * 10**9, "collector.rollout_length", "cuda")]
    assert refusal(items, 0, "p.toml", {"cpu": 8 * 10**9, "cuda": 80 * 10**9}, None, 8) is None
    said = refusal(items, 0, "p.toml", {"cpu": 8 * 10**9, "cuda": 20 * 10**9}, None, 8)
    assert said == ("p.toml: the rollout buffer (30.0 GB) would need about 30.0 GB, but 20.0 GB of memory is "
                    "available (cuda); lower collector.rollout_length (nothing was built)")
