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


def error(args: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    started = time.monotonic()
    assert main(args) == 2
    assert time.monotonic() - started < 60  # refused before building a billion of anything
    return capsys.readouterr().err


@pytest.mark.usefixtures("eight_gib")
class TestRefused:
    def test_collector_envs(self, capsys: pytest.CaptureFixture[str]) -> None:
        """collector.n_envs = 10**9: one env is measured, the total is refused with the numbers."""
        err = error(["check", str(HAPPO), "--set", "collector.n_envs=1_000_000_000"], capsys)
        assert re.fullmatch(
            rf"harl: {HAPPO}: collector.n_envs = 1,000,000,000 and evaluator.n_envs = 10: 1,000,000,010 "
            r"environments of about [\d.]+ [kM]B each \(one was built and measured\) need about [\d.]+ [TP]B, but "
            r"8.6 GB of memory is available \(cpu\); lower collector.n_envs \(and evaluator.n_envs\)\n", err), err

    def test_evaluator_envs(self, capsys: pytest.CaptureFixture[str]) -> None:
        """evaluator.n_envs = 10**9 is refused the same way."""
        err = error(["check", str(HAPPO), "--set", "evaluator.n_envs=1_000_000_000"], capsys)
        assert "collector.n_envs = 20 and evaluator.n_envs = 1,000,000,000: 1,000,000,020 environments" in err

    def test_rollout_length(self, capsys: pytest.CaptureFixture[str]) -> None:
        """rollout_length = 10**9: the rollout buffer's exact size per env step, times the steps, refused."""
        err = error(["check", str(HAPPO), "--set", "collector.rollout_length=1_000_000_000"], capsys)
        assert err == (
            f"harl: {HAPPO}: collector.rollout_length = 1,000,000,000 x collector.n_envs = 20: the rollout "
            "buffer (598 bytes per env step, 12.0 TB) and the update's batches need about 23.9 TB, but 8.6 GB "
            "of memory is available (cpu); lower collector.rollout_length or collector.n_envs\n")

    def test_replay_capacity(self, capsys: pytest.CaptureFixture[str]) -> None:
        """buffer.capacity = 10**12 is refused with bytes per transition x capacity."""
        err = error(["check", str(HASAC), "--set", "buffer.capacity=1_000_000_000_000"], capsys)
        assert err == (
            f"harl: {HASAC}: buffer.capacity = 1,000,000,000,000: the replay buffer (950 bytes per transition x "
            "1,000,000,000,000 transitions) would need about 950.0 TB, but 8.6 GB of memory is available (cpu); "
            "lower buffer.capacity\n")

    def test_train_refuses_too(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        """harl train refuses before making a run directory."""
        err = error(["train", str(HASAC), "--set", "buffer.capacity=100_000_000", "--set",
                     f'logging.dir="{tmp_path}"'], capsys)
        assert "would need about 95.0 GB, but 8.6 GB" in err
        assert list(tmp_path.iterdir()) == []


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
