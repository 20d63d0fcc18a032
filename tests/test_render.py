"""harl render: a video of the stated number of frames, the episode returns, clear refusals."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from harl.cli import main
from harl.errors import HarlError
from harl.render import make_render_env
from tests.fakes.counting import CountingConfig
from tests.test_cli import ROOT, train

FRAMES_PER_EPISODE = 26
"""MPE episodes are 25 steps: the frame after the reset and one after each step."""


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("mpe2", reason="the run uses MPE (pip install harl[mpe])")
    return train(tmp_path_factory.mktemp("render"))


def test_gif_of_two_episodes(run_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """render --episodes 2 shows 2 x 26 frames (at 10 per second) and prints both returns; the
    count it reports is the file's: 50, as MPE's first step moves nothing (its position update
    uses the velocity before the step's force), and pillow stores a frame equal to the one
    before it once, for twice as long."""
    pytest.importorskip("imageio", reason="harl render needs imageio (pip install harl[video])")
    from PIL import Image

    out = tmp_path / "spread.gif"
    capsys.readouterr()
    assert main(["render", str(run_dir), "--episodes", "2", "--out", str(out)]) == 0
    with Image.open(out) as gif:
        assert gif.size == (700, 700)
        durations = []
        for index in range(gif.n_frames):
            gif.seek(index)
            durations.append(gif.info["duration"])
    assert len(durations) == 2 * FRAMES_PER_EPISODE - 2
    assert durations[:2] == [200, 100] and durations[FRAMES_PER_EPISODE - 1] == 200  # each reset's frame
    assert sum(durations) == 2 * FRAMES_PER_EPISODE * 100  # 10 frames per second
    lines = capsys.readouterr().out.splitlines()
    assert [line.split(":")[0] for line in lines[:2]] == ["episode 0", "episode 1"]
    assert lines[0].endswith(", length 25")
    assert lines[2] == f"wrote {out}: {len(durations)} frames"


def test_reported_frames_are_the_files(run_dir: Path, tmp_path: Path) -> None:
    """``RenderResult.frames`` is what imageio reads back from the .gif; ``repeats`` the merged ones."""
    pytest.importorskip("imageio", reason="harl render needs imageio (pip install harl[video])")
    import imageio.v3 as iio

    from harl import api

    result = api.render(run_dir, 1, tmp_path / "one.gif")
    assert (result.frames, result.repeats) == (FRAMES_PER_EPISODE - 1, 1)
    assert len(iio.imread(result.path, index=None)) == result.frames


def test_mp4(run_dir: Path, tmp_path: Path) -> None:
    """An .mp4 (imageio-ffmpeg) holds one episode's frames."""
    pytest.importorskip("imageio_ffmpeg", reason="mp4 needs imageio-ffmpeg (pip install harl[video])")
    import imageio.v2 as imageio

    out = tmp_path / "spread.mp4"
    assert main(["render", str(run_dir), "--out", str(out)]) == 0
    with imageio.get_reader(out) as reader:
        assert reader.count_frames() == FRAMES_PER_EPISODE


def test_mp4_without_ffmpeg(run_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                            capsys: pytest.CaptureFixture[str]) -> None:
    """Without imageio-ffmpeg an .mp4 is refused with the extra to install and the GIF way out."""
    find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "imageio_ffmpeg" else find_spec(name, *a))
    out = tmp_path / "x.mp4"
    assert main(["render", str(run_dir), "--out", str(out)]) == 2
    assert capsys.readouterr().err == (
        f'harl: --out {out}: writing .mp4 needs: pip install "harl[video]" (the optional package '
        '"imageio-ffmpeg" is not installed); or write a .gif, which needs only imageio\n')


def test_other_suffix(run_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Only .gif and .mp4 are written."""
    assert main(["render", str(run_dir), "--out", "x.avi"]) == 2
    assert capsys.readouterr().err == "harl: --out x.avi: expected a .gif or .mp4 file name\n"


def test_env_without_rendering() -> None:
    """An env kind whose factory takes no render_mode is refused with the reason."""
    with pytest.raises(HarlError) as info:
        make_render_env(CountingConfig())
    assert str(info.value) == (
        'env kind "counting" cannot render frames: its factory takes no render_mode (an env renders when '
        'its factory accepts render_mode="rgb_array" and the env has render())')


def test_python_env_without_render_mode() -> None:
    """A kind = "python" factory that takes no render_mode is refused naming the key and the fix."""
    from harl.envs.python_env import PythonEnvConfig

    with pytest.raises(HarlError) as info:
        make_render_env(PythonEnvConfig(factory="examples.custom_env:make_env"))
    assert str(info.value) == (
        'env.factory: "examples.custom_env:make_env" takes no render_mode, so harl render cannot film it; '
        "give it a render_mode=None parameter and the env a render() method returning an (H, W, 3) uint8 "
        "frame")


def test_off_policy_run_in_a_gymnasium_env(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """An off-policy (HATD3) run on gymnasium's Pendulum renders too: one frame per step plus the reset's."""
    pytest.importorskip("imageio", reason="harl render needs imageio (pip install harl[video])")
    pytest.importorskip("pygame", reason="Pendulum-v1 draws its frames with pygame")
    settings = {"run.total_env_steps": 20, "collector.rollout_length": 10, "env.max_episode_steps": 10,
                "evaluator.episodes": 1, "evaluator.n_envs": 1, "logging.progress": "false",
                "critic.hidden_sizes": "[16,16]", "policy.hidden_sizes": "[16,16]"}
    sets = [arg for key, value in settings.items() for arg in ("--set", f"{key}={value}")]
    run = tmp_path / "run"
    assert main(["train", str(ROOT / "pipelines" / "hatd3_gym_pendulum.toml"), *sets, "--run-dir", str(run)]) == 0
    capsys.readouterr()
    assert main(["render", str(run), "--out", str(tmp_path / "pendulum.gif")]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("episode 0: return ") and lines[0].endswith(", length 10")
    assert lines[1] == f"wrote {tmp_path / 'pendulum.gif'}: 11 frames"


def test_value_family_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A QMIX run (agent Q networks, greedy over the available actions) on discrete MPE spread renders:
    one frame per step plus the reset's (the .gif stores MPE's unmoved first step once)."""
    pytest.importorskip("imageio", reason="harl render needs imageio (pip install harl[video])")
    pytest.importorskip("mpe2", reason="the run uses MPE (pip install harl[mpe])")
    settings = {"run.total_env_steps": 50, "collector.n_envs": 1, "buffer.batch_size": 1, "evaluator.episodes": 1,
                "evaluator.n_envs": 1, "logging.progress": "false", "policy.hidden_sizes": "[16]",
                "policy.recurrent": "naive"}
    sets = [arg for key, value in settings.items() for arg in ("--set", f"{key}={value}")]
    run = tmp_path / "run"
    pipeline = ROOT / "pipelines" / "qmix_mpe_spread_discrete.toml"
    assert main(["train", str(pipeline), *sets, "--run-dir", str(run)]) == 0
    capsys.readouterr()
    assert main(["render", str(run), "--out", str(tmp_path / "qmix.gif")]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("episode 0: return ") and lines[0].endswith(", length 25")
    assert lines[1] == f"wrote {tmp_path / 'qmix.gif'}: {FRAMES_PER_EPISODE - 1} frames"
