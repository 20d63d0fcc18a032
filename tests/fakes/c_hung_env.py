"""A user's env whose ``step()`` hangs inside C code that never returns to the interpreter (a
simulator deadlocked on its own mutex): Python cannot run a signal handler there, so only the
env watchdog's hard exit (``harl.rundir.signals.HARD_EXIT_S``) ends the run.  The C call
releases the GIL (ctypes does), as long-running simulator code usually does."""

from __future__ import annotations

import ctypes
from collections.abc import Sequence
from typing import Any

import numpy as np

from tests.fakes.hung_env import HungEnv

FACTORY = "tests.fakes.c_hung_env:make"


class CHungEnv(HungEnv):
    def step(self, actions: Sequence[np.ndarray]) -> Any:
        if self.lifetime + 1 >= self.hang_at:
            libc = ctypes.CDLL(None)
            mutex = ctypes.create_string_buffer(64)  # a pthread_mutex_t (40 bytes on x86-64 glibc)
            libc.pthread_mutex_init(mutex, None)
            libc.pthread_mutex_lock(mutex)
            libc.pthread_mutex_lock(mutex)  # a default mutex locked twice: a deadlock no signal ends
        return super().step(actions)


def make(hang_at: int = 1, hang_file: str = "", sleep: float = 0.0) -> CHungEnv:
    return CHungEnv(hang_at, hang_file, sleep)
