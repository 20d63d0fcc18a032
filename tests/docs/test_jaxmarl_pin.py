"""jaxmarl goes in with ``--no-deps`` (its gymnax would pin gymnasium < 1.4), so nothing else bounds its
version: every place that tells a user to install it names the one release harl's SMAX is tested on."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]
INSTALL = re.compile(r"--no-deps (jaxmarl\S*?)(?=[`\s\"'(]|$)")


def test_every_install_line_pins_the_same_jaxmarl() -> None:
    from harl.envs.smax import JAXMARL, MISSING_JAXMARL

    assert JAXMARL.startswith("jaxmarl==")
    files = [ROOT / "README.md", ROOT / "pyproject.toml", ROOT / "noxfile.py", *sorted((ROOT / "docs").rglob("*.md"))]
    found = {(str(path.relative_to(ROOT)), pin) for path in files
             for pin in INSTALL.findall(path.read_text(encoding="utf-8"))}
    wanted = {"README.md", "pyproject.toml", "docs/environments/smax.md", "docs/environments/index.md",
              "docs/development.md"}
    assert wanted <= {name for name, _ in found}
    assert {name: pin for name, pin in found if pin != JAXMARL} == {}
    assert INSTALL.findall(MISSING_JAXMARL) == [JAXMARL]
    assert f'JAXMARL = "{JAXMARL}"' in (ROOT / "noxfile.py").read_text(encoding="utf-8")


def test_the_missing_extra_message_pins_it(monkeypatch: pytest.MonkeyPatch) -> None:
    from harl.envs import smax
    from harl.errors import MissingExtraError

    for name in ("XLA_FLAGS", "JAX_PLATFORMS"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setitem(sys.modules, "jaxmarl.environments", None)
    with pytest.raises(MissingExtraError) as error:
        smax._import_smax()
    assert f"pip install --no-deps {smax.JAXMARL} (" in str(error.value)
