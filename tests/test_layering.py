"""Imports go one way (DESIGN.md section 4, rule 2): parsed from the source with ast, so it stays true.

Layers, lowest first; a module may import its own layer and lower ones, never a higher one:
settings/errors -> nets -> envs, buffers, returns -> collect, update -> compose -> run, cli.
"""

from __future__ import annotations

import ast
from pathlib import Path

HARL = Path(__file__).parent.parent / "harl"

LAYERS: list[tuple[str, ...]] = [
    ("harl.errors", "harl.fs", "harl.run.files", "harl.run.signals", "harl.settings", "harl.user_import",
     "harl.registry", "harl.config.run"),
    ("harl.nets", "harl.policy", "harl.sizes"),
    ("harl.envs", "harl.buffers", "harl.returns"),
    ("harl.collect", "harl.update", "harl.evaluate", "harl.run.checkpoint", "harl.logging", "harl.finite"),
    ("harl.config",),
    ("harl.compose", "harl.trainer"),
    ("harl.run", "harl.render", "harl.sweep", "harl.plot", "harl.export", "harl.inference"),
    ("harl.cli", "harl.cli_help", "harl.__main__"),
]


def layer_of(module: str) -> int | None:
    for level, names in enumerate(LAYERS):
        if any(module == n or module.startswith(n + ".") for n in names):
            return level
    return None


def module_name(path: Path) -> str:
    parts = path.relative_to(HARL.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(path: Path) -> list[tuple[int, str]]:
    """(line, module) of every harl import in the file, top-level or inside functions."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module == "harl" and node.level == 0:
            found.extend((node.lineno, f"harl.{alias.name}") for alias in node.names)  # from harl import registry
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append((node.lineno, node.module))
        elif isinstance(node, ast.Import):
            found.extend((node.lineno, alias.name) for alias in node.names)
    return [(line, name) for line, name in found if name == "harl" or name.startswith("harl.")]


def test_every_module_has_a_layer() -> None:
    missing = [module_name(p) for p in HARL.rglob("*.py") if layer_of(module_name(p)) is None
               and module_name(p) != "harl"]
    assert missing == []


def test_imports_go_one_way() -> None:
    """No module imports a higher layer; the registry (lowest) imports stage packages by name only."""
    upward = []
    for path in sorted(HARL.rglob("*.py")):
        here = layer_of(module_name(path))
        for line, name in imports(path):
            there = layer_of(name)
            if here is not None and there is not None and there > here:
                upward.append(f"{path.relative_to(HARL.parent)}:{line} imports {name}")
    assert upward == []


def test_the_collector_does_not_import_the_updater() -> None:
    offenders = [f"{p.name}: {name}" for p in (HARL / "collect").rglob("*.py") for _, name in imports(p)
                 if name.startswith("harl.update")]
    assert offenders == []


def test_no_import_cycles() -> None:
    """No chain of imports (function-local ones included) leads from a module back to itself."""
    modules = {module_name(p): p for p in HARL.rglob("*.py")}
    graph = {name: {target for _, target in imports(path) if target in modules and target != name}
             for name, path in modules.items()}
    cycles, state = [], dict.fromkeys(graph, 0)  # 0 unseen, 1 on the path, 2 done

    def visit(node: str, path: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(graph[node]):
            if state[nxt] == 1:
                cycles.append(" -> ".join([*path[path.index(nxt):], nxt]))
            elif state[nxt] == 0:
                visit(nxt, [*path, nxt])
        state[node] = 2

    for name in sorted(graph):
        if state[name] == 0:
            visit(name, [name])
    assert cycles == []
