"""Trials as Ray tasks (``--ray auto``, ``--ray ADDRESS`` or ``RAY_ADDRESS``).

Each trial is one task asking for the CPUs and GPUs its ``[run]`` needs (see
``trial_resources``); Ray starts it on any node with them free, in a fresh worker process
(``max_calls=1``) that runs ``run_logged`` on the trial's run directory.  The sweep
directory must be the same path on every node (a shared filesystem): the driver checks
that each node sees it before any trial starts.

- A task whose worker dies (killed, out of memory, its node lost) runs again, up to
  ``--max-retries`` times, and resumes from the trial's newest checkpoint.
- A trial that fails with a harl error is not retried: its message is reported.
- Ctrl-C cancels the tasks: Ray sends SIGINT to each running worker, whose run stops
  after its iteration with a checkpoint (a second Ctrl-C stops the workers at once).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from harl.errors import HarlError, import_extra
from harl.sweep.state import Display, TrialState
from harl.sweep.trial import Outcome, run_logged


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


def check_shared(ray: Any, sweep_dir: Path) -> None:
    """Every alive node must see the sweep directory (its sweep.json) at the same path."""
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    probe = ray.remote(num_cpus=0)(_node_sees)
    nodes = [n for n in ray.nodes() if n["Alive"]]
    seen = ray.get([probe.options(scheduling_strategy=NodeAffinitySchedulingStrategy(n["NodeID"], soft=False))
                    .remote(str(sweep_dir / "sweep.json")) for n in nodes])
    blind = [n["NodeManagerAddress"] for n, ok in zip(nodes, seen) if not ok]
    if blind:
        raise HarlError(f"{sweep_dir}: not reachable from the Ray node(s) {', '.join(blind)}; the sweep "
                        "directory must be the same path on every node (a shared filesystem): pass one "
                        "with --storage PATH (or --run-dir)")


def _ray_trial(run_dir: str) -> Outcome:
    return run_logged(Path(run_dir))


def on_ray(states: list[TrialState], address: str, max_retries: int, display: Display) -> None:
    """Run the trials as Ray tasks until each finished, failed or stopped (see the module doc)."""
    ray = import_ray()
    connected_here = connect(address)
    try:
        _run(ray, states, max_retries, display)
    finally:
        if connected_here:
            ray.shutdown()


def _run(ray: Any, states: list[TrialState], max_retries: int, display: Display) -> None:
    from ray.exceptions import RayError, RayTaskError, TaskCancelledError

    nodes = [n["Resources"] for n in ray.nodes() if n["Alive"]]
    largest = max((n.get("CPU", 0) for n in nodes), default=0)
    gpus = sum(n.get("GPU", 0) for n in nodes)
    resources = {s: trial_resources(s.spec, largest, gpus) for s in states}
    for state, (cpus, _) in resources.items():
        if cpus > largest:
            raise HarlError(f"{state.label}: needs {cpus:g} CPUs ([run] torch_threads plus the collector's "
                            f"subprocess workers) but the largest Ray node has {largest:g}; run the envs "
                            "inline (--set collector.backend=inline) or with fewer workers")
    check_shared(ray, states[0].run_dir.parent)
    remote = ray.remote(max_calls=1, max_retries=0)(_ray_trial)
    refs: dict[Any, TrialState] = {}

    def submit(state: TrialState) -> None:
        from harl.sweep.trial import checkpoint_iteration

        cpus, gpu = resources[state]
        state.status = "waiting"
        state.started_at.append(checkpoint_iteration(state.run_dir))
        refs[remote.options(num_cpus=cpus, num_gpus=gpu).remote(str(state.run_dir))] = state

    display.say(f"Ray: {len(nodes)} node(s), {sum(n.get('CPU', 0) for n in nodes):g} CPUs, {gpus:g} GPUs; "
                f"every trial's output goes to train.log in its run directory")
    for state in states:
        submit(state)
    interrupts = 0
    with display:
        while refs:
            try:
                ready, _ = ray.wait(list(refs), num_returns=1, timeout=0.5)
                for ref in ready:
                    state = refs.pop(ref)
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
                for state in refs.values():
                    if state.status == "waiting" and (state.run_dir / "metrics.csv").is_file():
                        state.status = "running"
                for state in states:
                    display.update(state)
            except KeyboardInterrupt:
                interrupts += 1
                if interrupts == 1:
                    display.say("Ctrl-C: the running trials stop after their iteration, with a checkpoint "
                                "(Ctrl-C again to stop them now)")
                for ref in refs:
                    ray.cancel(ref, force=interrupts > 1)


def ray_address(option: str | None) -> str | None:
    """The Ray address a sweep uses: ``--ray``, else RAY_ADDRESS, else None (local)."""
    return option or os.environ.get("RAY_ADDRESS") or None
