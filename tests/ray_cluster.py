"""Real local Ray for tests: in this process (``ray_local``) or a two-node cluster of
``ray start`` processes on this machine (``ray_cluster``).

Both keep Ray small (1 CPU per node, a 200 MB object store, no dashboard) and use their
own short temp directory (Unix socket paths must stay under ~100 characters), so they
never join another Ray on the machine.  They run without Ray's token authentication
(``RAY_AUTH_MODE=disabled``, only on 127.0.0.1): the token in ``~/.ray/auth_token`` is
shared by every Ray user of the machine and may change under a running test; a process
that connects to the cluster gets the same setting from ``LocalCluster.env``.  The cluster is stopped at the end by the ids of
the processes it started (never ``ray stop``, which would stop every Ray of the machine)
and a test checks that none is left.

Use them with ``from tests.ray_cluster import needs_ray, ray_cluster, ray_local  # noqa: F401``
(and ``# noqa: F811`` on a test that takes one as an argument);
tests marked ``needs_ray`` skip with the reason where Ray is not installed.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import attrs
import pytest

needs_ray = pytest.mark.skipif(importlib.util.find_spec("ray") is None,
                               reason='needs Ray (pip install "harl[ray]")')

OBJECT_STORE_BYTES = 200 * 1024**2
"""The smallest object store Ray accepts is ~75 MB; trials pass paths, not arrays."""
ENV = {"RAY_AUTH_MODE": "disabled", "RAY_USAGE_STATS_ENABLED": "0"}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _children(pid: int) -> list[int]:
    """Every descendant of ``pid`` (Linux /proc), deepest last."""
    parents: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        parents.setdefault(ppid, []).append(int(entry.name))
    found, todo = [], [pid]
    while todo:
        for child in parents.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@attrs.define
class LocalCluster:
    """Two Ray nodes started with ``ray start --block``; ``address`` is the head's."""

    address: str
    temp_dir: Path
    nodes: list[subprocess.Popen[bytes]]
    seen: set[int] = attrs.Factory(set)
    """Every process id the nodes have had (collected while they ran, for the teardown)."""

    @property
    def env(self) -> dict[str, str]:
        """The environment of a process that connects to the cluster (``--ray ADDRESS``)."""
        return {**os.environ, **ENV}

    def processes(self) -> list[int]:
        """The live processes of the cluster: the ``ray start`` processes and their descendants."""
        for node in self.nodes:
            self.seen.update([node.pid, *_children(node.pid)])
        return sorted(pid for pid in self.seen if _alive(pid))

    def stop(self) -> None:
        """SIGTERM to each node (``ray start --block`` stops its own processes), then SIGKILL
        to whichever of the processes seen is still alive after 20 s."""
        self.processes()
        for node in self.nodes:
            with contextlib.suppress(ProcessLookupError):
                node.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and self.processes():
            self.processes()
            time.sleep(0.2)
        for pid in self.processes():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        for node in self.nodes:
            with contextlib.suppress(subprocess.TimeoutExpired):
                node.wait(5)
        shutil.rmtree(self.temp_dir, ignore_errors=True)


def _ray_start(args: list[str], log: Path) -> subprocess.Popen[bytes]:
    ray = str(Path(sys.executable).with_name("ray"))
    with log.open("wb") as out:
        return subprocess.Popen([ray, "start", "--block", "--num-cpus", "1", "--num-gpus", "0",
                                 "--object-store-memory", str(OBJECT_STORE_BYTES), *args],
                                stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True, env={**os.environ, **ENV})


def _wait_for_nodes(address: str, count: int, cluster: LocalCluster, timeout: float = 300) -> None:
    """Until every node's log says it started and ``count`` nodes are alive (asked in a child
    process, so this one stays unconnected); minutes on a loaded machine."""
    probe = ("import ray, sys; ray.init(address=sys.argv[1], logging_level='ERROR', log_to_driver=False);"
             "print(sum(n['Alive'] for n in ray.nodes()))")
    deadline = time.monotonic() + timeout
    logs = [cluster.temp_dir / name for name in ("head.log", "worker.log")[:count]]
    while time.monotonic() < deadline:
        cluster.processes()
        if any(node.poll() is not None for node in cluster.nodes):
            raise RuntimeError(f"a ray start process exited; see the logs in {cluster.temp_dir}")
        if all("Ray runtime started" in log.read_text(errors="replace") for log in logs):
            done = subprocess.run([sys.executable, "-c", probe, address], capture_output=True, text=True,
                                  timeout=120, env=cluster.env)
            if done.returncode == 0 and done.stdout.strip().splitlines()[-1:] == [str(count)]:
                return
        time.sleep(1)
    raise RuntimeError(f"the local Ray cluster did not reach {count} nodes in {timeout:.0f} s")


@contextlib.contextmanager
def local_cluster() -> Iterator[LocalCluster]:
    """A head and a worker node on this machine, 1 CPU each; stopped (every process) on exit."""
    temp_dir = Path(tempfile.mkdtemp(prefix="ray", dir="/tmp"))
    port = _free_port()
    address = f"127.0.0.1:{port}"
    cluster = LocalCluster(address, temp_dir, [])
    try:
        cluster.nodes.append(_ray_start(["--head", "--port", str(port), "--node-ip-address", "127.0.0.1",
                                         "--include-dashboard", "false", "--temp-dir", str(temp_dir),
                                         "--disable-usage-stats"], temp_dir / "head.log"))
        _wait_for_nodes(address, 1, cluster)
        cluster.nodes.append(_ray_start(["--address", address, "--node-ip-address", "127.0.0.1"],
                                        temp_dir / "worker.log"))
        _wait_for_nodes(address, 2, cluster)
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="session")
def ray_cluster() -> Iterator[LocalCluster]:
    """A two-node Ray cluster (``ray start --head`` + ``ray start --address``) for the session."""
    pytest.importorskip("ray", reason='needs Ray (pip install "harl[ray]")')
    with local_cluster() as cluster:
        yield cluster
    assert cluster.processes() == [], "processes of the local Ray cluster are still running"


@pytest.fixture
def ray_local() -> Iterator[None]:
    """``ray.init`` in this process with 2 CPUs (a fresh local instance), shut down after the test."""
    ray = pytest.importorskip("ray", reason='needs Ray (pip install "harl[ray]")')
    temp_dir = tempfile.mkdtemp(prefix="ray", dir="/tmp")
    monkeypatch = pytest.MonkeyPatch()
    for name, value in ENV.items():
        monkeypatch.setenv(name, value)
    ray.init(address="local", num_cpus=2, num_gpus=0, object_store_memory=OBJECT_STORE_BYTES,
             include_dashboard=False, _temp_dir=temp_dir, logging_level="ERROR", log_to_driver=False,
             configure_logging=False)
    try:
        yield
    finally:
        ray.shutdown()
        monkeypatch.undo()
        shutil.rmtree(temp_dir, ignore_errors=True)
