"""Test-wide settings, and the two markers CI selects by.

- ``extra``: the test needs an optional extra (an env family, an exporter, a tracker, Ray).
  Added automatically to every test of a module that asks for an optional package (with
  ``pytest.importorskip`` or ``importlib.util.find_spec``), so no such test can go unmarked
  (the module's own ``importorskip`` still decides what skips); written by hand, it skips the
  test with the extra to install wherever one of its packages is absent.  The README's test command runs
  everything in a venv holding only the README's extras; CI's second step installs every
  extra and runs ``-m extra``, the tests the first step skipped.
- ``slow``: a test that runs real processes for more than ~20 s; ``nox -s slow`` runs them,
  and CI keeps one representative of each kind unmarked.  Deselected by default (pyproject's
  ``addopts``); ``-m slow`` selects them.
"""

from __future__ import annotations

import re
import signal
from functools import cache
from pathlib import Path

import pytest
import torch

# Small MLPs on a 2-core machine: a second OpenMP thread only adds contention.
torch.set_num_threads(1)

# A test suite started as a background job of a script (``cmd &``) inherits SIGINT ignored, and
# harl rightly keeps an ignored SIGINT ignored; the Ctrl-C tests need it delivered, in this
# process and in the runs they start.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

EXTRA_OF_PACKAGE = {
    "pettingzoo": "pettingzoo", "supersuit": "pettingzoo", "magent2": "pettingzoo", "lbforaging": "pettingzoo",
    "rware": "pettingzoo", "pygame": "pettingzoo", "Box2D": "pettingzoo",
    "gymnasium_robotics": "mamujoco", "mujoco": "mamujoco", "vmas": "vmas", "jax": "smax", "jaxmarl": "smax",
    "jsbsim": "lag", "gfootball": "football", "onnx": "onnx", "onnxruntime": "onnx", "mlflow": "mlflow",
    "wandb": "wandb", "ray": "ray", "imageio_ffmpeg": "video", "rliable": "compare",
}
"""Optional packages outside the README's extras (``mpe``, ``test``) -> the extra that brings them."""

_ASKED = re.compile(r"""(?:importorskip|find_spec)\(\s*["']([A-Za-z0-9_]+)""")


@cache
def extras_asked_in(path: Path) -> tuple[str, ...]:
    """The extras a test module asks for, read off its source."""
    found = {EXTRA_OF_PACKAGE[name] for name in _ASKED.findall(path.read_text(encoding="utf-8"))
             if name in EXTRA_OF_PACKAGE}
    return tuple(sorted(found))


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "extra(*names): needs these optional extras (skips with the reason "
                            "where absent); added automatically where a module asks for an optional package")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        asked = extras_asked_in(Path(str(item.fspath)))
        if asked and item.get_closest_marker("extra") is None:  # for -m extra only: the module's own
            item.add_marker(pytest.mark.extra(*asked, auto=True))  # importorskip decides what skips


def pytest_runtest_setup(item: pytest.Item) -> None:
    """An explicitly marked test skips with the reason where one of its extras is absent."""
    from importlib.util import find_spec

    for marker in item.iter_markers("extra"):
        if marker.kwargs.get("auto"):
            continue
        for extra in marker.args:
            missing = [name for name, of in EXTRA_OF_PACKAGE.items() if of == extra and find_spec(name) is None]
            if missing:
                pytest.skip(f'needs the {extra} extra: pip install -e ".[{extra}]" ({missing[0]} is not installed)')

