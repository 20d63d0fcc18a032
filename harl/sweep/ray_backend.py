"""Trials as Ray tasks (``--ray auto``, ``--ray ADDRESS`` or ``RAY_ADDRESS``).

Each trial is one task asking for the CPUs and GPUs its ``[run]`` needs (see
``trial_resources``); Ray starts it on any node with them free, in a fresh worker process
(``max_calls=1``) that runs ``run_logged`` on the trial's run directory.  The sweep
directory must be the same path on every node (a shared filesystem): the driver checks
that each node sees it before any trial starts.

- A task whose worker dies (killed, out of memory, its node lost) runs again, up to
  ``--max-retries`` times, and resumes from the trial's newest checkpoint.
- A trial that fails with a harl error is not retried: its message is reported.
- Ctrl-C or SIGTERM to the driver cancels the tasks: Ray sends SIGINT to each running worker,
  whose run stops after its iteration with a checkpoint (a second signal stops the workers at
  once); the driver exits 128 + the first signal (``harl.sweep.local.driver_stops``).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, Generic, TypeVar

from harl.errors import HarlError, import_extra
from harl.sweep.local import stops_now
from harl.sweep.state import Display, TrialState
from harl.sweep.trial import Outcome, checkpoint_iteration, run_logged


def import_ray() -> Any:
    """The ``ray`` module, or a ``MissingExtraError`` naming ``--ray`` and the extra."""
    return import_extra("ray", "harl train --ray", "ray")


def connect(address: str) -> bool:
    """Connect to Ray unless already connected; True when this call connected (so the sweep
    disconnects at its end).  ``auto``: RAY_ADDRESS, else the cluster last started with
    ``ray start`` on this machine, else a new local Ray on this machine's cores."""
    ray = import_ray()
    if ray.is_initialized():
        return False
    try:
        ray.init(address=None if address == "auto" else address, logging_level="ERROR",
                 log_to_driver=False, configure_logging=False)
    except (ConnectionError, ValueError, RuntimeError) as exc:
        raise HarlError(f"--ray {address}: cannot connect to a Ray cluster ({str(exc).splitlines()[0]}); "
                        "start one with ray start --head (see docs/ray.md), or pass its address "
                        "(--ray HOST:6379)") from None
    return True


def trial_resources(spec: Any, node_cpus: float, cluster_gpus: float) -> tuple[float, float]:
    """(CPUs, GPUs) of a trial: its torch threads (at least 1) plus its subprocess env
    workers (``workers = 0``: one per env, at most a node's CPUs); one GPU when ``[run]
    device`` is cuda, or auto on a cluster that has GPUs."""
    collector = spec.collector
    cpus = max(1, spec.run.torch_threads)
    if getattr(collector, "backend", "inline") == "subprocess":
        cpus += collector.workers or min(collector.n_envs, int(node_cpus))
    device = spec.run.device
    gpus = 1.0 if device.startswith("cuda") or (device == "auto" and cluster_gpus > 0) else 0.0
    return float(cpus), gpus


def _node_sees(path: str) -> bool:
    return Path(path).is_file()


def check_shared(ray: Any, directory: Path, record: str, what: str) -> None:
    """Every alive node must see ``directory`` (its ``record`` file: sweep.json, tune.json) at the
    same path; ``what`` names the directory in the message (``sweep``, ``tune``)."""
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    probe = ray.remote(num_cpus=0)(_node_sees)
    nodes = [n for n in ray.nodes() if n["Alive"]]
    seen = ray.get([probe.options(scheduling_strategy=NodeAffinitySchedulingStrategy(n["NodeID"], soft=False))
                    .remote(str(directory / record)) for n in nodes])
    blind = [n["NodeManagerAddress"] for n, ok in zip(nodes, seen) if not ok]
    if blind:
        raise HarlError(f"{directory}: not reachable from the Ray node(s) {', '.join(blind)}; the {what} "
                        "directory must be the same path on every node (a shared filesystem): pass one "
                        "with --storage PATH (or --run-dir)")


K = TypeVar("K")


class Tasks(Generic[K]):
    """Ray tasks of ``body(run_dir)``, each in a fresh worker (``max_calls=1``, no Ray retry), by key.

    What a sweep's trials (``on_ray``) and ``harl tune --ray`` (``harl.tune.runners.OnRay``) share:
    the connection, the cluster's size, starting, polling, cancelling and disconnecting.  What each
    does with a task that ended (retry, report, score) stays with its caller.
    """

    def __init__(self, address: str, body: Callable[[str], Any]) -> None:
        self.ray = import_ray()
        self.connected = connect(address)
        alive = [n["Resources"] for n in self.ray.nodes() if n["Alive"]]
        self.nodes = len(alive)
        self.cpus = float(sum(n.get("CPU", 0) for n in alive))
        self.largest = float(max((n.get("CPU", 0) for n in alive), default=0))
        """The CPUs of the largest node: no task may ask for more."""
        self.gpus = float(sum(n.get("GPU", 0) for n in alive))
        self.remote = self.ray.remote(max_calls=1, max_retries=0)(body)
        self.running: dict[Any, K] = {}

    def __len__(self) -> int:
        return len(self.running)

    def launch(self, key: K, run_dir: Path, cpus: float, gpus: float) -> None:
        self.running[self.remote.options(num_cpus=cpus, num_gpus=gpus).remote(str(run_dir))] = key

    def ready(self, timeout: float) -> list[tuple[K, Any]]:
        """(key, object ref) of the tasks that ended, waiting up to ``timeout`` s; ``ray.get`` the ref."""
        if not self.running:
            return []
        done, _ = self.ray.wait(list(self.running), num_returns=len(self.running), timeout=timeout)
        return [(self.running.pop(ref), ref) for ref in done]

    def cancel(self, force: bool) -> None:
        """SIGINT to each running task's worker (its run stops after its iteration); ``force``: kill it."""
        for ref in self.running:
            self.ray.cancel(ref, force=force)

    def close(self) -> None:
        """Kill what still runs; disconnect when this pool connected."""
        self.cancel(force=True)
        if self.connected:
            self.ray.shutdown()


def _ray_trial(run_dir: str) -> Outcome:
    return run_logged(Path(run_dir))


def on_ray(states: list[TrialState], address: str, max_retries: int, display: Display) -> None:
    """Run the trials as Ray tasks until each finished, failed or stopped (see the module doc)."""
    tasks: Tasks[TrialState] = Tasks(address, _ray_trial)
    try:
        _run(tasks, states, max_retries, display)
    finally:
        tasks.close()


def _run(tasks: Tasks[TrialState], states: list[TrialState], max_retries: int, display: Display) -> None:
    from ray.exceptions import RayError, RayTaskError, TaskCancelledError

    ray = tasks.ray
    resources = {s: trial_resources(s.spec, tasks.largest, tasks.gpus) for s in states}
    for state, (cpus, _) in resources.items():
        if cpus > tasks.largest:
            raise HarlError(f"{state.label}: needs {cpus:g} CPUs ([run] torch_threads plus the collector's "
                            f"subprocess workers) but the largest Ray node has {tasks.largest:g}; run the envs "
                            "inline (--set collector.backend=inline) or with fewer workers")
    check_shared(ray, states[0].run_dir.parent, "sweep.json", "sweep")

    def submit(state: TrialState) -> None:
        state.status = "waiting"
        state.started_at.append(checkpoint_iteration(state.run_dir))
        tasks.launch(state, state.run_dir, *resources[state])

    display.say(f"Ray: {tasks.nodes} node(s), {tasks.cpus:g} CPUs, {tasks.gpus:g} GPUs; "
                f"every trial's output goes to train.log in its run directory")
    for state in states:
        submit(state)
    interrupts = 0
    stops = stops_now()
    with display:
        while tasks:
            if len(stops.signals) > interrupts:  # the driver's stop signals (driver_stops)
                if not interrupts:
                    stops.notice(display)
                interrupts = len(stops.signals)
                tasks.cancel(force=interrupts > 1)
            try:
                for state, ref in tasks.ready(0.5):
                    try:
                        outcome = ray.get(ref)
                    except TaskCancelledError:
                        state.left_waiting()
                    except RayTaskError as exc:  # a bug in the trial: its traceback is in train.log
                        state.status, state.message = "failed", str(exc).splitlines()[-1]
                    except RayError as exc:
                        why = f"its Ray worker died ({type(exc).__name__})"
                        if interrupts:
                            state.status, state.message = "stopped", why
                        elif state.died(why, max_retries, display.say):
                            submit(state)
                    else:
                        state.status, state.message = outcome.status, outcome.message
                        state.started_at[-1] = outcome.started_at
                for state in tasks.running.values():
                    if state.status == "waiting" and (state.run_dir / "metrics.csv").is_file():
                        state.status = "running"
                for state in states:
                    display.update(state)
            except KeyboardInterrupt:  # off the main thread no handler is installed: Ctrl-C raises here
                interrupts += 1
                if interrupts == 1:
                    display.notice("Ctrl-C: the running trials stop after their iteration, with a checkpoint "
                                   "(Ctrl-C again to stop them now)")
                tasks.cancel(force=interrupts > 1)


def ray_address(option: str | None) -> str | None:
    """The Ray address a sweep uses: ``--ray``, else RAY_ADDRESS, else None (local)."""
    return option or os.environ.get("RAY_ADDRESS") or None
