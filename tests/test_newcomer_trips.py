"""The trips a newcomer met following the README and docs literally (issue 44, item 6): each
pointer leads somewhere, each help text says what the docs say."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
import tomllib

from tests.compare.helpers import needs_rliable
from tests.compare.synthetic import make_run

ROOT = Path(__file__).parent.parent


def one_line(text: str) -> str:
    return " ".join(text.split())


def test_tune_help_prunes_vectorize_as_the_docs_say(capsys: pytest.CaptureFixture[str]) -> None:
    """docs/tune.md: populations "are pruned the same way"; the help once said "no pruning"."""
    from harl.cli_help import parser

    with pytest.raises(SystemExit):
        parser().parse_args(["tune", "--help"])
    help_text = one_line(capsys.readouterr().out)
    vectorize = help_text[help_text.index("--vectorize train"):help_text.index("--ray [ADDRESS] run")]
    assert "no pruning" not in vectorize
    assert "pruned the same way" in vectorize
    docs = one_line((ROOT / "docs" / "tune.md").read_text(encoding="utf-8"))
    populations = docs[docs.index("**Populations** (`--vectorize`)"):docs.index("**Ray**")]
    assert "are pruned the same way" in populations


def readme_headings() -> set[str]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    return {m.group(1).strip() for m in re.finditer(r"^#+ (.+)$", text, flags=re.MULTILINE)}


def test_every_readme_pointer_names_a_heading() -> None:
    """``see the README's "X" section`` in pipelines/ and pyproject.toml: X is a README heading;
    a pointer with no section named is refused (the qmix pipeline's "the one --no-deps step"
    pointed at nothing)."""
    files = [*sorted((ROOT / "pipelines").glob("*.toml")), ROOT / "pyproject.toml"]
    headings = readme_headings()
    pointers = 0
    for path in files:
        for line in path.read_text(encoding="utf-8").splitlines():
            if "README" not in line or not line.lstrip().startswith("#"):
                continue
            pointers += 1
            named = re.search(r'README\'s "([^"]+)"', line)
            assert named, f"{path.name}: a README pointer without a section: {line.strip()}"
            assert named.group(1) in headings, f"{path.name}: no README heading {named.group(1)!r}"
    assert pointers >= 2


@pytest.mark.parametrize("missing", ["jax", "jaxmarl.environments"])
def test_missing_smax_packages_name_the_no_deps_step(missing: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """SMAX's first error (no jax at all, or no jaxmarl) gives both install steps, so one round
    installs it; the README's "Installing extras" section gives the same step."""
    from harl.envs import smax
    from harl.errors import MissingExtraError

    for name in ("XLA_FLAGS", "JAX_PLATFORMS"):
        monkeypatch.delenv(name, raising=False)  # put back as they were after _import_smax sets them
    monkeypatch.setitem(sys.modules, missing, None)
    with pytest.raises(MissingExtraError) as error:
        smax._import_smax()
    assert 'pip install "harl[smax]"' in str(error.value)
    assert "pip install --no-deps jaxmarl" in str(error.value)
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme[readme.index("## Installing extras"):readme.index("## The commands")]
    assert "pip install --no-deps jaxmarl" in section


@needs_rliable
def test_compare_of_two_folders_writes_beside_them(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``harl compare runs/a runs/b`` from a checkout: ``runs/compare``, not ``./compare``; and
    ``compare/`` is ignored by git should one be written there anyway."""
    from harl.compare import compare
    from harl.compare.report import default_out

    runs = tmp_path / "runs"
    for seed in (1, 2, 3):
        make_run(runs / "happo", "sequential", "ppo", seed, [-100.0 + 10 * k + seed for k in range(4)])
        make_run(runs / "mappo", "simultaneous", "ppo", seed, [-100.0 + 9 * k + seed for k in range(4)])
    checkout = tmp_path / "checkout"
    checkout.mkdir()
    monkeypatch.chdir(checkout)
    assert default_out(["../runs/happo"]) == Path("../runs/happo/compare")
    result = compare([runs / "happo", runs / "mappo"], draw=False)
    assert {f.parent for f in result.files} == {runs / "compare"}
    assert list(checkout.iterdir()) == []
    assert "compare/" in (ROOT / ".gitignore").read_text(encoding="utf-8").splitlines()


def test_a_sweep_run_as_another_algorithm_is_named_by_it(tmp_path: Path) -> None:
    """``--set updater.kind=simultaneous`` on happo_mpe_spread: the sweep, its runs' folders and
    their pipeline.toml (the plot legend's name) say mappo, from harl.algorithms' table."""
    from harl.sweep.plan import Request, Sweep

    request = Request.parse(str(ROOT / "pipelines" / "happo_mpe_spread.toml"),
                            ["updater.kind=simultaneous", f"logging.dir={tmp_path.as_posix()!r}"], "1,2", [])
    sweep = Sweep.new(request, None, None)
    assert sweep.sweep_dir.name.startswith("mappo-mpe-spread-sweep-")
    assert [s.run_dir.name for s in sweep.states] == ["mappo-mpe-spread-s1", "mappo-mpe-spread-s2"]
    for state in sweep.states:
        written = tomllib.loads((state.run_dir / "pipeline.toml").read_text(encoding="utf-8"))
        assert written["run"]["name"] == "mappo-mpe-spread"
    assert any('the runs are named "mappo-mpe-spread"' in note for note in sweep.notes)
    kept = Sweep.new(Request.parse(str(ROOT / "pipelines" / "happo_mpe_spread.toml"),
                                   [f"logging.dir={tmp_path.as_posix()!r}"], "1", []), None, None)
    assert [s.run_dir.name for s in kept.states] == ["happo-mpe-spread-s1"]


def test_the_python_snippet_runs_from_the_clones_parent_folder(tmp_path: Path) -> None:
    """The README's "From Python" snippet saved beside a clone named harl: ``import harl`` is the
    package, not the clone's folder as a namespace package (pyproject's package-dir makes
    ``pip install -e .`` a static .pth, searched before the clone's parent's folders win)."""
    import importlib.metadata
    import json
    import subprocess

    installed = [d for d in importlib.metadata.distributions(name="harl") if d.read_text("direct_url.json")]
    if not installed or not json.loads(installed[0].read_text("direct_url.json") or "{}").get(
            "dir_info", {}).get("editable"):
        pytest.skip("harl is not an editable install")  # (a checkout's harl.egg-info has no direct_url.json)
    site = Path(str(installed[0].locate_file("")))
    if list(site.glob("__editable___harl_*_finder.py")):
        pytest.skip("an editable install made before pyproject's package-dir (its import hook): pip install -e . again")
    (tmp_path / "harl").symlink_to(ROOT, target_is_directory=True)
    code = "import harl; assert callable(harl.train), harl; print(harl.__file__)"
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert Path(done.stdout.strip()).resolve() == (ROOT / "harl" / "__init__.py").resolve()
