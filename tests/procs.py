"""Processes seen through /proc (Linux): a run's process group and its env workers."""

from __future__ import annotations

from pathlib import Path


def _stat(pid: int) -> list[str] | None:
    """The fields of /proc/PID/stat after the command name (state, ppid, pgrp, ...)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None


def _processes() -> list[tuple[int, list[str]]]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and (fields := _stat(int(entry.name))) is not None:
            found.append((int(entry.name), fields))
    return found


def group(pgid: int) -> list[int]:
    """Processes alive (zombies aside) in process group ``pgid``."""
    return [pid for pid, f in _processes() if int(f[2]) == pgid and f[0] != "Z"]


def workers(pid: int) -> list[int]:
    """The env workers of trainer ``pid`` (spawned children, not multiprocessing's resource tracker)."""
    found = []
    for child, fields in _processes():
        if int(fields[1]) != pid:
            continue
        try:
            cmdline = Path(f"/proc/{child}/cmdline").read_bytes()
        except OSError:
            continue
        if b"spawn_main" in cmdline and b"resource_tracker" not in cmdline:
            found.append(child)
    return found
