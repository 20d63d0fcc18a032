"""A user's env whose ``step()`` never returns (a deadlocked simulator, a network call that
never answers): ``tests.fakes.bad_env``'s valid env, hung from lifetime step ``hang_at`` on.

``hang_file``: hang only while this file exists (delete it and a resumed run goes on);
``hang_env``: only the env built with this reset seed's index hangs (-1: every env).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from tests.fakes.bad_env import BadEnv, write_pipeline

FACTORY = "tests.fakes.hung_env:make"


class HungEnv(BadEnv):
    def __init__(self, hang_at: int, hang_file: str, sleep: float) -> None:
        super().__init__("ok", 1, sleep)
        self.hang_at, self.hang_file = hang_at, hang_file

    def step(self, actions: Sequence[np.ndarray]) -> Any:
        if self.lifetime + 1 >= self.hang_at and (not self.hang_file or Path(self.hang_file).exists()):
            threading.Event().wait()  # forever, using no CPU
        return super().step(actions)


def make(hang_at: int = 1, hang_file: str = "", sleep: float = 0.0) -> HungEnv:
    return HungEnv(hang_at, hang_file, sleep)


def write_hung_pipeline(path: Path, hang_at: int, hang_file: Path | None = None, total_env_steps: int = 400,
                        every: int = 1000, sleep: float = 0.0, **collector: Any) -> Path:
    """``bad_env.write_pipeline`` (2 envs x 10 steps per iteration) on this env, subprocess backend."""
    env: dict[str, Any] = {"hang_at": hang_at, "hang_file": str(hang_file or ""), "sleep": sleep}
    write_pipeline(path, total_env_steps=total_env_steps, every=every, env=env,
                   **{"backend": "subprocess", "workers": 2, **collector})
    text = path.read_text().replace("tests.fakes.bad_env:make", FACTORY).replace('mode = "ok", ', "")
    path.write_text(text)
    return path
