"""Watching air combat: an episode as a Tacview ACMI 2.1 file and as a 3-D picture, from the env and
through ``harl render``."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from harl.cli import main
from harl.envs.air_combat import AirCombatConfig, make_air_combat_env
from harl.envs.air_combat.tacview import Recording
from harl.errors import HarlError
from harl.render import make_render_env

pytest.importorskip("jsbsim", reason="the air-combat env flies JSBSim's F-16 (pip install harl[lag])")

PIPELINES = Path(__file__).parent.parent.parent / "pipelines"
CENTRED = np.array([20, 20, 20, 15])
HEADER = ["FileType=text/acmi/tacview", "FileVersion=2.1", "0,ReferenceTime=2020-04-01T00:00:00Z"]
OBJECT = re.compile(r"^([0-9A-F]+),T=([-0-9.]+)\|([-0-9.]+)\|([-0-9.]+)\|([-0-9.]+)\|([-0-9.]+)\|([-0-9.]+),(.*)$")


def parse_acmi(text: str) -> tuple[list[str], list[tuple[float, list[str]]]]:
    """The global lines before the first frame, then each frame's time and lines."""
    lines = text.splitlines()
    first = next(i for i, line in enumerate(lines) if line.startswith("#"))
    frames: list[tuple[float, list[str]]] = []
    for line in lines[first:]:
        if line.startswith("#"):
            frames.append((float(line[1:]), []))
        else:
            frames[-1][1].append(line)
    return lines[:first], frames


def check_acmi(text: str, aircraft: int) -> dict[str, list[float]]:
    """Tacview's structure: the header, frame times from 0 increasing, coordinates in range; returns each
    object's frame times.  Every aircraft has a line per frame until a ``-id`` removes it."""
    header, frames = parse_acmi(text)
    assert header[:3] == HEADER
    assert all(line.startswith("0,") for line in header[2:])
    times = [t for t, _ in frames]
    assert times[0] == 0.0 and all(b > a for a, b in zip(times, times[1:]))
    seen: dict[str, list[float]] = {}
    removed: set[str] = set()
    for time, lines in frames:
        flying = set()
        for line in lines:
            if line.startswith("-"):
                removed.add(line[1:])
                continue
            match = OBJECT.match(line)
            assert match, line
            uid = match.group(1)
            lon, lat, alt, roll, pitch, yaw = (float(match.group(i)) for i in range(2, 8))
            assert 119.0 < lon < 121.0 and 59.5 < lat < 60.5 and 0.0 < alt < 20_000.0, line
            assert -180.0 <= roll <= 180.0 and -90.0 <= pitch <= 90.0 and -360.0 <= yaw <= 360.0, line
            assert uid not in removed, f"{uid} after its removal"
            props = dict(p.split("=", 1) for p in match.group(8).split(","))
            assert props["Color"] in ("Red", "Blue")
            if props["Type"] == "Air+FixedWing":
                flying.add(uid)
            seen.setdefault(uid, []).append(time)
        planes = {uid for uid in seen if len(uid) == 5}
        assert flying == planes - removed, f"#{time}: one line per live aircraft"
    assert len([uid for uid in seen if len(uid) == 5]) == aircraft
    return seen


def test_a_dodge_episode_as_acmi(tmp_path: Path) -> None:
    """1v1 dodge, red flying straight: blue's missile (``B01001``) flies from launch to the hit, red is
    removed with an explosion where it ended; 0.2 s frames; every frame holds each live aircraft once."""
    env = make_air_combat_env(AirCombatConfig(task="1v1/DodgeMissile/vsBaseline", action_type="multidiscrete"))
    recording = Recording()
    env.reset(seed=1)
    recording.add(*env.track())
    steps = 0
    while True:
        step = env.step([CENTRED])
        steps += 1
        recording.add(*env.track())
        if step.terminated or step.truncated:
            break
    assert step.info["shot_down"] == 1.0
    out = tmp_path / "dodge.acmi"
    recording.write_acmi(out, "1v1 dodge")
    raw = out.read_bytes()
    assert raw.startswith(b"\xef\xbb\xbf")  # UTF-8 with a byte-order mark, as LAG's
    text = raw.decode("utf-8-sig")
    seen = check_acmi(text, aircraft=2)
    header, frames = parse_acmi(text)
    assert "0,Title=1v1 dodge" in header
    assert len(frames) == steps + 1 and frames[1][0] == pytest.approx(0.2)
    assert set(seen) == {"A0100", "B0100", "B01001", "EA0100", "EB01001"}
    assert len(seen["A0100"]) == steps and len(seen["B0100"]) == steps + 1  # red's last frame is its removal
    last = frames[-1][1]
    assert "-A0100" in last and any(line.startswith("EA0100,") and "Type=Misc+Explosion" in line for line in last)


def test_objects_of_each_env() -> None:
    """Heading: one aircraft; harl's dogfight: four (blue learners, red scripted); 2v2 combat: four."""
    for task, names in [("heading", ["agent_0"]), ("2v2_noweapon", ["blue_0", "blue_1", "red_0", "red_1"]),
                        ("2v2_noweapon_selfplay", ["red_0", "red_1", "blue_0", "blue_1"])]:
        env = make_air_combat_env(AirCombatConfig(task=task, action_type="multidiscrete"))
        env.reset(seed=0)
        env.step([CENTRED] * env.n_agents)
        time, objects = env.track()
        assert time == pytest.approx(0.2)
        assert [o.name for o in objects] == names and all(o.alive for o in objects)
        assert len({o.uid for o in objects}) == len(objects)


def test_video_refusal_names_the_tracks() -> None:
    """``harl render`` of an air-combat run as a video says the env writes tracks instead."""
    with pytest.raises(HarlError, match="--format acmi .* or --format png3d"):
        make_render_env(AirCombatConfig())


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny HAPPO run on the 1v1 dodge task (episodes of 120 steps: the missile is launched)."""
    settings = {"run.total_env_steps": 20, "collector.n_envs": 1, "collector.rollout_length": 20,
                "evaluator.episodes": 1, "evaluator.n_envs": 1, "logging.progress": "false", "env.max_episode_steps": 120}
    sets = [arg for key, value in settings.items() for arg in ("--set", f"{key}={value}")]
    run = tmp_path_factory.mktemp("tacview") / "run"
    assert main(["train", str(PIPELINES / "happo_air_combat_1v1_dodge_missile.toml"), *sets, "--run-dir", str(run)]) == 0
    return run


def test_render_acmi(run_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``harl render RUN --out x.acmi``: one deterministic episode, its return printed, a valid file."""
    out = tmp_path / "fight.acmi"
    capsys.readouterr()
    assert main(["render", str(run_dir), "--out", str(out)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("episode 0: return ")
    length = int(lines[0].rsplit(" ", 1)[1])
    assert lines[1] == f"wrote {out}: {length + 1} frames"
    check_acmi(out.read_text(encoding="utf-8-sig"), aircraft=2)
    # With neither --out nor --format an air-combat run is written as RUN_DIR/render.acmi: the same episode.
    assert main(["render", str(run_dir)]) == 0
    assert (run_dir / "render.acmi").read_bytes() == out.read_bytes()


def test_render_png3d(run_dir: Path, tmp_path: Path) -> None:
    """``--format png3d``: a PNG picture of the tracks."""
    pytest.importorskip("matplotlib", reason="png3d draws with matplotlib (pip install harl[plot])")
    out = tmp_path / "fight.png"
    assert main(["render", str(run_dir), "--format", "png3d", "--out", str(out)]) == 0
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and out.stat().st_size > 10_000


def test_render_refusals(run_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A format whose file name does not fit, and more than one episode, are refused in one line."""
    assert main(["render", str(run_dir), "--format", "acmi", "--out", "x.gif"]) == 2
    assert capsys.readouterr().err == "harl: --out x.gif: --format acmi writes a .acmi file\n"
    assert main(["render", str(run_dir), "--format", "acmi", "--episodes", "2"]) == 2
    assert capsys.readouterr().err == "harl: --episodes: --format acmi records one episode, got 2\n"
