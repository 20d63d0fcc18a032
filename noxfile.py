"""Developer sessions: ``nox -s tests``, ``nox -s lint``, ``nox -s pipelines``."""

from __future__ import annotations

from pathlib import Path

import nox

nox.options.sessions = ["lint", "pipelines", "tests"]
nox.options.reuse_existing_virtualenvs = True

TORCH = "torch==2.13.0"  # the CPU build; installed first so no CUDA build is pulled in


@nox.session
def tests(session: nox.Session) -> None:
    """The test suite (pass pytest arguments after --)."""
    session.install(TORCH)
    session.install("-e", ".[test,mpe,mamujoco,vmas]")
    session.run("python", "-m", "pytest", *session.posargs)


@nox.session
def lint(session: nox.Session) -> None:
    """ruff over the package, tests and benchmarks."""
    session.install("ruff")
    session.run("ruff", "check", "harl", "tests", "benchmarks", "noxfile.py")


@nox.session
def pipelines(session: nox.Session) -> None:
    """Validate and build every shipped pipeline (``harl check``), running nothing."""
    session.install(TORCH)
    session.install("-e", ".[mpe,mamujoco,vmas]")
    for path in sorted(Path("pipelines").glob("*.toml")):
        session.run("harl", "check", str(path))
