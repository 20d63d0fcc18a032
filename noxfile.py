"""Developer sessions: ``nox -s tests``, ``nox -s slow``, ``nox -s lint``, ``nox -s pipelines``, ``nox -s docs``,
``nox -s docs_browser``."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import nox

nox.options.sessions = ["lint", "pipelines", "tests"]
nox.options.reuse_existing_virtualenvs = True

TORCH = "torch==2.13.0"  # the CPU build; installed first so no CUDA build is pulled in
EXTRAS = ".[test,mpe,mamujoco,vmas,smax,lag,onnx,mlflow,wandb,pettingzoo,ray,compare]"  # as CI: every env family that installs from wheels, export and trackers
JAXMARL = "jaxmarl==0.2.0"  # without its dependencies (gymnax pins gymnasium < 1.4): see pyproject's smax extra
PLAYWRIGHT = "playwright==1.65.2"  # drives the system's Chromium (as .ci/run); never `playwright install`


@nox.session
def tests(session: nox.Session) -> None:
    """The test suite (pass pytest arguments after --)."""
    session.install(TORCH)
    session.install("-e", EXTRAS)
    session.install("--no-deps", JAXMARL)
    session.run("python", "-m", "pytest", *session.posargs)


@nox.session
def slow(session: nox.Session) -> None:
    """The tests marked slow (real processes for more than ~20 s), which the default run deselects."""
    session.install(TORCH)
    session.install("-e", EXTRAS)
    session.install("--no-deps", JAXMARL)
    session.run("python", "-m", "pytest", "-m", "slow", *session.posargs)


@nox.session
def lint(session: nox.Session) -> None:
    """ruff over the package, tests and benchmarks; pylint's duplicate-code check over the package
    (tests/duplicate_check.py: six identical lines or more fail); mypy over the package ([tool.mypy] in
    pyproject.toml)."""
    session.install("ruff", "pylint>=4")
    session.run("ruff", "check", "harl", "tests", "benchmarks", "examples", "noxfile.py")
    session.run("python", "tests/duplicate_check.py", "harl")
    session.install(TORCH)  # mypy reads torch's, numpy's, gymnasium's and attrs' own types
    session.install("-e", ".", "mypy>=1.10")
    session.run("mypy", "harl")


@nox.session
def pipelines(session: nox.Session) -> None:
    """Validate and build every shipped pipeline (``harl check``), running nothing."""
    session.install(TORCH)
    session.install("-e", EXTRAS)
    session.install("--no-deps", JAXMARL)
    for path in sorted(Path("pipelines").glob("*.toml")):
        if "_football_" in path.name:  # gfootball builds from source: nox -s football checks these
            continue
        session.run("harl", "check", str(path))


@nox.session
def docs(session: nox.Session) -> None:
    """Build the documentation site into site/ in strict mode: a broken link or a missing page fails.

    The stage reference pages are generated during the build from harl's own stage
    descriptions (docs/hooks/stage_reference.py), so harl itself is installed, without extras.
    """
    session.install(TORCH)
    session.install("-e", ".[docs]")
    session.run("mkdocs", "build", "--strict", *session.posargs, env={"NO_MKDOCS_2_WARNING": "1"})


@nox.session
def docs_browser(session: nox.Session) -> None:
    """The site built and opened from disk in a headless Chromium with no network: every request must
    be a file, the search box finds pages, long code lines scroll (tests/docs/test_site_offline.py).

    Uses the system's Chromium (Debian: apt-get install chromium; HARL_CHROMIUM names another one),
    not a browser downloaded by ``playwright install``.
    """
    if not (os.environ.get("HARL_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")):
        session.error("No Chromium: install it first (Debian/Ubuntu: sudo apt-get install chromium), "
                      "or set HARL_CHROMIUM to a Chromium or Chrome executable.")
    session.install(TORCH)
    session.install("-e", ".[docs,test]", PLAYWRIGHT)
    session.run("python", "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/docs/test_site_offline.py",
                *session.posargs)


FOOTBALL_APT = (
    "build-essential", "cmake", "libgl1-mesa-dev", "libegl-dev", "libsdl2-dev", "libsdl2-image-dev",
    "libsdl2-ttf-dev", "libsdl2-gfx-dev", "libboost-thread-dev", "libboost-system-dev",
    "libboost-filesystem-dev", "libboost-python-dev",
)
"""Debian / Ubuntu packages gfootball's engine build needs (boost-python must match the venv's Python)."""
FOOTBALL_PIP = ("gfootball==2.10.2", "gym==0.25.2", "six")
"""The football extra (keep in step with pyproject.toml): gfootball 2.10.2 needs gym < 0.26 (its
wrappers use the 4-tuple step API) and imports six without declaring it."""


@nox.session
def football(session: nox.Session) -> None:
    """Build Google Research Football (about 20 minutes of C++ on two cores) and run its tests.

    Installs the engine's build packages with apt-get when run as root (otherwise prints the
    command to run first).  gfootball's setup.py runs a shell script that imports psutil with
    the ``python3`` on PATH, so it is built without pip's build isolation, with psutil,
    setuptools and wheel installed first.  The environment is kept (``-r``), so later runs
    skip the build.
    """
    apt = ["apt-get", "install", "-y", "--no-install-recommends", *FOOTBALL_APT]
    if os.name == "posix" and os.geteuid() == 0 and shutil.which("apt-get"):
        session.run("apt-get", "update", "-qq", external=True)
        session.run(*apt, external=True, env={"DEBIAN_FRONTEND": "noninteractive"})
    else:
        session.log("Not root or no apt-get: install the build packages first, e.g. sudo " + " ".join(apt))
    session.install(TORCH)
    session.install("-e", ".[test]")
    session.install("psutil", "setuptools", "wheel")
    session.install("--no-build-isolation", *FOOTBALL_PIP)
    session.run("python", "-m", "pytest", "tests/envs/test_football.py", *session.posargs)
