"""The process and Ray-task pools that ``harl train --jobs/--ray`` and ``harl tune`` share
(``harl.sweep.local.Processes``, ``harl.sweep.ray_backend.Tasks``, ``check_shared``); Ray here is
a small fake, so these run without the ray extra (tests/sweep/test_sweep_ray.py runs a real one)."""

from __future__ import annotations

import signal
import sys
import time
import types
from pathlib import Path
from typing import Any

import pytest

from harl.errors import HarlError
from harl.sweep.local import Processes
from harl.sweep.ray_backend import Tasks, check_shared


def _wait_all(pool: Processes[str], timeout: float = 30.0) -> dict[str, int]:
    ended: dict[str, int] = {}
    deadline = time.monotonic() + timeout
    while pool and time.monotonic() < deadline:
        ended.update(pool.ended())
        time.sleep(0.05)
    return ended


def test_processes_report_each_exit_once_and_log_their_output(tmp_path: Path) -> None:
    pool: Processes[str] = Processes()
    pool.launch("ok", "json.tool", ["--help"], tmp_path / "ok.log")
    pool.launch("bad", "json.tool", [str(tmp_path / "missing.json")], tmp_path / "bad.log")
    ended = _wait_all(pool)
    assert ended["ok"] == 0 and ended["bad"] != 0
    assert pool.ended() == [] and len(pool) == 0
    assert "usage" in (tmp_path / "ok.log").read_text()


def test_stop_passes_the_signal_on_and_close_ends_what_runs(tmp_path: Path) -> None:
    pool: Processes[int] = Processes(new_session=True)
    for key in (1, 2):
        pool.launch(key, "http.server", ["0", "--bind", "127.0.0.1"], tmp_path / f"{key}.log")
    time.sleep(0.5)
    pool.stop(signal.SIGTERM)
    assert _wait_all(pool) == {1: -signal.SIGTERM, 2: -signal.SIGTERM}
    pool.launch(3, "http.server", ["0", "--bind", "127.0.0.1"], tmp_path / "3.log")
    pool.close()
    assert all(p.poll() is not None for p in pool.running)


class _Remote:
    def __init__(self, ray: FakeRay, fn: Any) -> None:
        self.ray, self.fn = ray, fn

    def options(self, **kwargs: Any) -> _Remote:
        self.ray.options.append(kwargs)
        return self

    def remote(self, *args: Any) -> Any:
        ref = object()
        self.ray.results[ref] = self.fn(*args)
        return ref


class FakeRay(types.ModuleType):
    """What Tasks and check_shared call of ray, run at once in this process."""

    def __init__(self, nodes: list[dict[str, Any]]) -> None:
        super().__init__("ray")
        self._nodes, self.results, self.options, self.cancelled = nodes, {}, [], []
        self.shut = False

    def is_initialized(self) -> bool:
        return False

    def init(self, **_: Any) -> None:
        pass

    def nodes(self) -> list[dict[str, Any]]:
        return self._nodes

    def remote(self, **_: Any) -> Any:
        return lambda fn: _Remote(self, fn)

    def wait(self, refs: list[Any], num_returns: int, timeout: float) -> tuple[list[Any], list[Any]]:
        return refs[:num_returns], refs[num_returns:]

    def get(self, refs: Any) -> Any:
        return [self.results[r] for r in refs] if isinstance(refs, list) else self.results[refs]

    def cancel(self, ref: Any, force: bool) -> None:
        self.cancelled.append(force)

    def shutdown(self) -> None:
        self.shut = True


def _node(name: str, cpus: float, gpus: float = 0) -> dict[str, Any]:
    return {"Alive": True, "NodeID": name, "NodeManagerAddress": name, "Resources": {"CPU": cpus, "GPU": gpus}}


@pytest.fixture
def fake_ray(monkeypatch: pytest.MonkeyPatch) -> FakeRay:
    ray = FakeRay([_node("a", 4), _node("b", 8, 1), {"Alive": False, "Resources": {"CPU": 64}}])
    strategies = types.ModuleType("ray.util.scheduling_strategies")
    strategies.NodeAffinitySchedulingStrategy = lambda node, soft: node  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "ray", ray)
    monkeypatch.setitem(sys.modules, "ray.util", types.ModuleType("ray.util"))
    monkeypatch.setitem(sys.modules, "ray.util.scheduling_strategies", strategies)
    return ray


def test_tasks_read_the_alive_nodes_and_run_by_key(fake_ray: FakeRay, tmp_path: Path) -> None:
    tasks: Tasks[str] = Tasks("auto", lambda run_dir: f"ran {Path(run_dir).name}")
    assert (tasks.nodes, tasks.cpus, tasks.largest, tasks.gpus) == (2, 12.0, 8.0, 1.0)
    tasks.launch("x", tmp_path / "x", 2.0, 0.0)
    assert len(tasks) == 1 and fake_ray.options == [{"num_cpus": 2.0, "num_gpus": 0.0}]
    assert [(key, fake_ray.get(ref)) for key, ref in tasks.ready(0)] == [("x", "ran x")]
    assert not tasks
    tasks.launch("y", tmp_path / "y", 1.0, 0.0)
    tasks.close()
    assert fake_ray.cancelled == [True] and fake_ray.shut


def test_check_shared_names_the_nodes_that_cannot_see_the_directory(fake_ray: FakeRay, tmp_path: Path) -> None:
    (tmp_path / "tune.json").write_text("{}")
    check_shared(fake_ray, tmp_path, "tune.json", "tune")  # this process is every node here: it sees it
    with pytest.raises(HarlError, match=r"not reachable from the Ray node\(s\) a, b; the sweep directory"):
        check_shared(fake_ray, tmp_path, "sweep.json", "sweep")
