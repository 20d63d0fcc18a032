"""``harl render RUN_DIR``: a run's policy on video, deterministic actions.

::

    env = make_render_env(spec.env)                 # the factory's render_mode="rgb_array"
    for episode in range(n):
        obs, _, avail = env.reset(seed=base + episode)
        frames: env.render() after the reset and after every step, until the episode ends

Episode ``e`` is seeded ``run.seed * 1000 + 900 + e``, so a video is reproducible.  An env
kind renders when its factory takes ``render_mode`` and the env it returns has
``render()`` returning an ``(H, W, 3)`` uint8 frame.  Videos are written with imageio
(``pip install "harl[video]"``): ``.gif`` through pillow, ``.mp4`` through imageio-ffmpeg.

A kind registered with ``tracks=True`` (air combat) records its objects instead: its env's
``track()`` gives the time and every aircraft and missile after the reset and after each step, and
``--format acmi`` writes one episode as a Tacview ACMI 2.1 text file, ``--format png3d`` as a 3-D
matplotlib picture (``harl.envs.air_combat.tacview``); an ``--out`` ending in ``.acmi`` or
``.png`` picks the format, and such a run with neither is written as ``RUN_DIR/render.acmi``.
"""

from __future__ import annotations

import importlib.util
import inspect
import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs
import numpy as np
import torch

from harl.errors import HarlError, MissingExtraError

if TYPE_CHECKING:
    from harl.evaluator import ActingPolicy

DEFAULT_FPS = 10
FORMATS = (".gif", ".mp4")
TRACK_FORMATS = {"acmi": ".acmi", "png3d": ".png"}
"""``--format`` of a kind that records tracks -> the file name's ending."""


@attrs.frozen
class RenderResult:
    path: Path
    frames: int
    """The frames the file holds (read back from a .gif)."""
    returns: list[float]
    lengths: list[int]
    repeats: int = 0
    """Frames equal to the one before, which a .gif holds once, shown for their summed time
    (MPE's first step never moves anything, so its frame repeats the reset's)."""


def make_render_env(env_config: Any) -> Any:
    """One env of ``env_config``'s kind built to return ``rgb_array`` frames, or a HarlError."""
    from harl.envs.registry import env_entry

    entry = env_entry(env_config)
    kind, factory = entry.kind, entry.factory
    takes_mode = False
    if factory is not None and not entry.parts.get("vectorised"):  # a vectorised kind's builds a batch
        try:
            takes_mode = "render_mode" in inspect.signature(factory).parameters
        except (TypeError, ValueError):  # a builtin or C factory: no signature to read
            pass
    if factory is None or not takes_mode:
        tracks = ("; it records its episodes instead: harl render RUN_DIR --format acmi (a Tacview file) "
                  "or --format png3d (a 3-D picture)") if entry.parts.get("tracks") else ""
        raise HarlError(f'env kind "{kind}" cannot render frames: its factory takes no render_mode '
                        '(an env renders when its factory accepts render_mode="rgb_array" and the env '
                        f"has render()){tracks}")
    env = factory(env_config, render_mode="rgb_array")
    if not callable(getattr(env, "render", None)):
        env.close()
        raise HarlError(f'env kind "{kind}" cannot render frames: its env has no render() method')
    return env


def check_video(out: Path) -> None:
    """A HarlError unless ``out`` names a .gif or .mp4 that the installed packages can write."""
    suffix = out.suffix.lower()
    if suffix not in FORMATS:
        raise HarlError(f"--out {out}: expected a .gif or .mp4 file name")
    if importlib.util.find_spec("imageio") is None:
        raise MissingExtraError("harl render", "video", "imageio")
    if suffix == ".mp4" and importlib.util.find_spec("imageio_ffmpeg") is None:
        raise HarlError(f'--out {out}: writing .mp4 needs: pip install "harl[video]" (the optional package '
                        '"imageio-ffmpeg" is not installed); or write a .gif, which needs only imageio')


class Video:
    """Frames to a file: an .mp4 is encoded as frames come; a .gif is written at ``close``
    (pillow needs every frame at once, so long videos are better as .mp4).

    ``frames`` is what the file holds: pillow stores a frame equal to the one before it once,
    lengthening the first's duration, so a .gif's count is read back from the file at
    ``close`` and the frames merged so are counted in ``repeats``.
    """

    def __init__(self, out: Path, fps: int) -> None:
        check_video(out)
        out.parent.mkdir(parents=True, exist_ok=True)
        self.out, self.fps, self.frames, self.repeats = out, fps, 0, 0
        self._gif: list[np.ndarray] | None = None
        self._mp4: Any = None
        if out.suffix.lower() == ".gif":
            self._gif = []
        else:
            import imageio.v2 as imageio

            # macro_block_size=1 keeps the frame size (MPE's 700 px is no multiple of 16).
            self._mp4 = imageio.get_writer(out, format="FFMPEG", mode="I", fps=fps, codec="libx264",
                                           macro_block_size=1)

    def add(self, frame: np.ndarray) -> None:
        self.frames += 1
        if self._gif is not None:
            self._gif.append(frame)
        else:
            self._mp4.append_data(frame)

    def close(self) -> None:
        if self._mp4 is not None:
            self._mp4.close()
        elif self._gif:
            import imageio.v3 as iio
            from PIL import Image  # imageio's own dependency

            iio.imwrite(self.out, np.stack(self._gif), extension=".gif", duration=1000 / self.fps, loop=0)
            with Image.open(self.out) as gif:
                self.frames, self.repeats = gif.n_frames, self.frames - gif.n_frames


def default_out(run_dir: Path) -> Path:
    """``RUN_DIR/render.mp4`` when imageio-ffmpeg is installed, else ``RUN_DIR/render.gif``."""
    return run_dir / ("render.mp4" if importlib.util.find_spec("imageio_ffmpeg") else "render.gif")


def output_format(fmt: str | None, out: Path | None) -> str | None:
    """``video``, ``acmi`` or ``png3d``: ``fmt`` if given, else what ``out``'s name ends in, else None."""
    if fmt is not None:
        if fmt != "video" and fmt not in TRACK_FORMATS:
            raise HarlError(f"--format: expected video, {' or '.join(TRACK_FORMATS)}, got {fmt!r}")
        if out is not None and fmt in TRACK_FORMATS and not out.name.lower().endswith(TRACK_FORMATS[fmt]):
            raise HarlError(f"--out {out}: --format {fmt} writes a {TRACK_FORMATS[fmt]} file")
        return fmt
    if out is None:
        return None
    name = out.name.lower()
    return next((f for f, ending in TRACK_FORMATS.items() if name.endswith(ending)), "video")


def records_tracks(env_config: Any) -> bool:
    """Whether ``env_config``'s kind records its objects (registered with ``tracks=True``)."""
    from harl.envs.registry import env_entry

    return bool(env_entry(env_config).parts.get("tracks"))


@torch.no_grad()
def render_run(run_dir: Path, checkpoint: Path | None, episodes: int, out: Path | None,
               fps: int | None = None, fmt: str | None = None) -> RenderResult:
    """Load the run's newest (or the named) checkpoint and film ``episodes`` episodes (or record
    one: ``--format acmi`` or ``png3d``)."""
    from harl.run.open import open_run, spec_of_run

    if episodes < 1:
        raise HarlError(f"--episodes: expected a positive integer, got {episodes}")
    if not os.environ.get("DISPLAY"):
        # MuJoCo picks its OpenGL backend when imported; without a display only EGL (or
        # OSMesa, if the user says so) renders off-screen.
        os.environ.setdefault("MUJOCO_GL", "egl")
    fmt = output_format(fmt, out)
    spec, _ = spec_of_run(run_dir)
    if fmt is None:
        fmt = "acmi" if records_tracks(spec.env) else "video"
    if fmt in TRACK_FORMATS:
        return record_run(run_dir, checkpoint, episodes, out or run_dir / f"render{TRACK_FORMATS[fmt]}", fmt)
    out = out or default_out(run_dir)
    check_video(out)  # before the work: a missing package is said at once
    run = open_run(run_dir, checkpoint, one_env=True)  # on- or off-policy alike
    stages = run.stages
    try:
        env = make_render_env(spec.env)
    except BaseException:
        stages.close()
        raise
    stages.policy.eval()
    policy = stages.evaluator.policy  # typed by what acting asks of it (ActingPolicy)
    returns: list[float] = []
    lengths: list[int] = []
    try:
        video = Video(out, fps or int(getattr(env, "render_fps", DEFAULT_FPS)))
        try:
            for episode in range(episodes):
                total, steps = play_episode(env, policy, spec.run.seed * 1000 + 900 + episode,
                                            lambda: video.add(_frame(env)))
                returns.append(total)
                lengths.append(steps)
        finally:
            video.close()
    finally:
        env.close()
        stages.close()
    return RenderResult(out, video.frames, returns, lengths, video.repeats)


@torch.no_grad()
def record_run(run_dir: Path, checkpoint: Path | None, episodes: int, out: Path, fmt: str) -> RenderResult:
    """One deterministic episode of the run's policy, its aircraft and missiles frame by frame, as a
    Tacview ACMI file (``fmt`` ``acmi``) or a 3-D picture (``png3d``)."""
    from harl.envs.air_combat.tacview import Recording
    from harl.envs.registry import env_entry
    from harl.run.open import open_run, spec_of_run

    if episodes != 1:
        raise HarlError(f"--episodes: --format {fmt} records one episode, got {episodes}")
    spec, _ = spec_of_run(run_dir)
    entry = env_entry(spec.env)
    if not entry.parts.get("tracks") or entry.factory is None:
        raise HarlError(f'--format {fmt}: env kind "{entry.kind}" records no tracks (aircraft and missiles '
                        'frame by frame); the air-combat envs do (kind = "air_combat"); harl render '
                        "films the others to a .gif or .mp4")
    if fmt == "png3d" and importlib.util.find_spec("matplotlib") is None:
        raise MissingExtraError("harl render --format png3d", "plot", "matplotlib")
    run = open_run(run_dir, checkpoint, one_env=True)
    stages = run.stages
    try:
        env = entry.factory(spec.env)
    except BaseException:
        stages.close()
        raise
    stages.policy.eval()
    recording = Recording()
    try:
        total, steps = play_episode(env, stages.evaluator.policy, spec.run.seed * 1000 + 900,
                                    lambda: recording.add(*env.track()))
    finally:
        env.close()
        stages.close()
    title = f"{getattr(spec.env, 'task', entry.kind)}: return {total:.1f}, {steps} steps"
    if fmt == "acmi":
        recording.write_acmi(out, title)
    else:
        recording.draw_png3d(out, title)
    return RenderResult(out, len(recording.frames), [total], [steps])


@torch.no_grad()
def play_episode(env: Any, policy: ActingPolicy, seed: int, after: Callable[[], None] = lambda: None
                 ) -> tuple[float, int]:
    """One episode of ``env`` (a single env, not a vector) with ``policy``'s deterministic actions,
    the state ``policy.act`` returns carried to its next step; ``after()`` once after the reset and
    once after every step (a frame).  Returns (the return, the length)."""
    obs, _, avail = env.reset(seed=seed)
    after()
    hidden = policy.initial_hidden(1, "cpu")  # None: nothing carried (feed-forward actors)
    starts = torch.ones(1)
    total, steps, done = 0.0, 0, False
    while not done:
        # copies (torch.tensor): an env may hand out read-only arrays (MPE's masks)
        obs_t = [torch.tensor(o, dtype=torch.float32).unsqueeze(0) for o in obs]
        avail_t = None if avail is None else [torch.tensor(a, dtype=torch.float32).unsqueeze(0) for a in avail]
        actions, hidden = policy.act(obs_t, avail_t, deterministic=True, hidden=hidden, starts=starts)
        starts = torch.zeros(1)
        step = env.step([a[0].numpy() for a in actions])
        obs, avail = step.obs, step.avail
        total += float(np.mean(step.rewards))  # as the vector envs count a return
        steps += 1
        done = bool(step.terminated or step.truncated)
        after()
    return total, steps


def _frame(env: Any) -> np.ndarray:
    frame = np.asarray(env.render())
    if frame.ndim != 3 or frame.shape[-1] not in (3, 4):
        raise HarlError(f"the env's render() returned an array of shape {frame.shape}; "
                        "expected an (height, width, 3) RGB frame")
    return frame[..., :3].astype(np.uint8, copy=False)
