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

import os
import re
import signal
from collections.abc import Iterator
from functools import cache
from pathlib import Path

import pytest

# An OpenMP thread waiting for work spins on its core for a while before it sleeps (libgomp's default):
# beside a second pytest-xdist worker, a test that runs torch on 2 threads (a shipped pipeline's own
# run.torch_threads = 2) spins against it (harl.compose.busy_cores_note): two iterations of
# pipelines/happo_mpe_torch_spread.toml took 21-37 s on a loaded 2-core machine, 4 s with PASSIVE.
# OpenMP reads this once, as torch loads it, so before torch's import; the processes a test starts
# inherit it.  Only speed changes: no test's result depends on how a waiting thread waits.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import torch  # noqa: E402

from harl.rundir import signals as run_signals  # noqa: E402

# Small MLPs on a 2-core machine: a second OpenMP thread only adds contention.  Under pytest-xdist
# (pyproject's addopts: one worker per core) each worker is a process of its own and runs this too,
# so the workers together use a thread per core; _isolated_process_state puts it back after a test
# that ran a pipeline with more (run.torch_threads, which harl sets for the whole process).
THREADS = 1
torch.set_num_threads(THREADS)

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


@pytest.hookimpl(optionalhook=True)  # pytest-xdist's hook: unknown (and never called) under -p no:xdist
def pytest_xdist_auto_num_workers(config: pytest.Config) -> int | None:
    """``-n auto``: one worker per core this process may run on (harl.compose.usable_cores), whether
    or not psutil is installed (xdist's own count takes psutil's physical cores where it is, which
    CI's second step installs, and may be 1 on a 2-vCPU machine).  ``PYTEST_XDIST_AUTO_NUM_WORKERS``
    and ``-n logical`` still go to xdist's own count (None: the next implementation decides)."""
    if os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS") or config.getoption("numprocesses") == "logical":
        return None
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


@pytest.fixture(autouse=True)
def _isolated_process_state() -> Iterator[None]:
    """After each test, put back what a test's in-process run changes for the whole process, so that
    no later test sees it: in one process file order decided which tests came after, under
    pytest-xdist any test may.

    - The stop signals received (``harl.rundir.signals.reset``): a test that stops an in-process run
      with Ctrl-C or SIGTERM (tests/test_determinism.py) leaves what a command needs on its way out:
      the first signal recorded (``harl suite`` and sweeps then start no further run) and SIGINT,
      SIGTERM and SIGUSR1 set to SIG_IGN, which every process a later test starts inherits (its
      Ctrl-C and SIGTERM never arrive).
    - torch's thread count (``[run] torch_threads``, set by ``build_stages``)."""
    yield
    run_signals.reset()
    if torch.get_num_threads() != THREADS:
        torch.set_num_threads(THREADS)


def pytest_addoption(parser: pytest.Parser, pluginmanager: pytest.PytestPluginManager) -> None:
    """Without pytest-xdist (``-p no:xdist``, or a venv installed before the test extra took it),
    pyproject's ``--numprocesses auto --dist loadfile`` are accepted and the tests run in this one
    process (its ``-n``, a short option, only xdist may register)."""
    if not pluginmanager.has_plugin("xdist"):
        group = parser.getgroup("xdist", "pytest-xdist is not in use: its options are ignored")
        group.addoption("--numprocesses", dest="numprocesses", default=None, help="ignored")
        group.addoption("--dist", dest="dist", default="no", help="ignored")


def pytest_report_header(config: pytest.Config) -> str | None:
    if not config.pluginmanager.has_plugin("xdist") and config.getoption("numprocesses") not in (None, "0"):
        return ("pytest-xdist is not in use (-p no:xdist, or not installed: pip install -e \".[test]\"): "
                "the tests run in this one process")
    return None


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

