"""Imports go one way (docs/architecture.md, "Layers"), no stage writes another's attributes
("Records between stages") and nothing outside the Trainer touches its private members ("The
one loop"): parsed from the source with ast, so it stays true.

Layers, lowest first; a module may import its own layer and lower ones, never a higher one:
settings/errors -> nets -> envs, buffers, returns -> collect, update -> compose -> run, cli.
"""

from __future__ import annotations

import ast
from pathlib import Path

HARL = Path(__file__).parent.parent / "harl"

LAYERS: list[tuple[str, ...]] = [
    ("harl.errors", "harl.fs", "harl.rundir", "harl.settings", "harl.user_import",
     "harl.registry", "harl.protocols", "harl.algorithms", "harl.warm_calls"),
    ("harl.nets", "harl.policy", "harl.sizes"),
    ("harl.envs", "harl.buffers", "harl.returns"),
    ("harl.collect", "harl.update", "harl.evaluator", "harl.logging", "harl.finite",
     "harl.callbacks", "harl.families", "harl.parts", "harl.teams"),
    ("harl.config",),
    ("harl.compose", "harl.trainer", "harl.loop", "harl.team_build", "harl.roles"),
    ("harl.run", "harl.api", "harl.render", "harl.sweep", "harl.population", "harl.plot", "harl.export", "harl.inference", "harl.compat",
     "harl.utils", "harl.compare", "harl.tune", "harl.suite"),
    ("harl.cli", "harl.cli_help", "harl.cli_rules", "harl.compare.command", "harl.tune.command", "harl.__main__", "harl.runners"),
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


STAGE_NAMES = {"buffer", "collector", "returns", "updater", "evaluator", "critic_learner", "team", "venv"}
"""Names that hold another stage wherever they appear (a parameter, ``self.buffer``, ``stages.buffer``)."""
OWNERS = {"buffer": ("harl/buffers/",), "venv": ("harl/envs/",)}
"""Packages whose modules define that stage and so may write its attributes."""


def foreign_writes(source: str, where: str) -> list[str]:
    """``x.attr = ...`` / ``x.attr += ...`` / ``x.attr[i] = ...`` / ``x.attr[i].copy_(...)`` where
    ``x`` is a stage name (or ``self.<stage name>``, ``stages.<stage name>``) this module does not own."""
    owned = {name for name, homes in OWNERS.items() if any(where.startswith(h) for h in homes)}

    def stage_of(node: ast.AST) -> str | None:
        """The stage a target's base names: ``buffer``, ``self.buffer`` or ``stages.buffer`` -> "buffer"."""
        if isinstance(node, ast.Name):
            return node.id if node.id in STAGE_NAMES else None
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.attr in STAGE_NAMES:
            return node.attr
        return None

    def written(target: ast.AST) -> str | None:
        while isinstance(target, ast.Subscript):  # buffer.obs[i][t] = ...
            target = target.value
        if isinstance(target, ast.Attribute):
            stage = stage_of(target.value)
            if stage is not None and stage not in owned:
                return f"{ast.unparse(target)}"
        return None

    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source)):
        targets: list[ast.AST] = []
        if isinstance(node, ast.Assign):
            targets = list(node.targets)
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
            targets = [node.target]
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
              and node.func.attr in ("copy_", "fill_", "zero_", "add_", "mul_")):
            targets = [node.func.value]  # buffer.obs[i][0].copy_(x) writes buffer.obs
        for target in targets:
            for leaf in (target.elts if isinstance(target, ast.Tuple) else [target]):
                hit = written(leaf)
                if hit:
                    found.append((node.lineno, f"{where}:{node.lineno} writes {hit}"))
    return [text for _, text in sorted(found)]


def test_no_stage_writes_another_stages_attributes() -> None:
    """A collector hands the buffer records, a returns stage calls ``set_targets``: no module outside
    the buffer's own package assigns ``buffer.<attr>`` (or writes into its arrays), and so on for
    every stage name; the trainer and tests may read, never write."""
    offenders = []
    for path in sorted(HARL.rglob("*.py")):
        where = str(path.relative_to(HARL.parent))
        offenders += foreign_writes(path.read_text(encoding="utf-8"), where)
    assert offenders == []


def test_the_foreign_write_check_can_fail() -> None:
    """The check sees each kind of write it is meant to forbid, and lets reads and owners through."""
    bad = (
        "def collect(self, buffer):\n"
        "    buffer.final_values[t] = v\n"
        "    buffer.obs[i][t + 1].copy_(o)\n"
        "    self.buffer.step += 1\n"
        "    stages.returns.config = None\n"
        "    buffer.advantages, buffer.returns = a, r\n"
    )
    assert foreign_writes(bad, "harl/collect/x.py") == [
        "harl/collect/x.py:2 writes buffer.final_values",
        "harl/collect/x.py:3 writes buffer.obs",
        "harl/collect/x.py:4 writes self.buffer.step",
        "harl/collect/x.py:5 writes stages.returns.config",
        "harl/collect/x.py:6 writes buffer.advantages",
        "harl/collect/x.py:6 writes buffer.returns",
    ]
    fine = "def f(self, buffer):\n    x = buffer.obs[0]\n    buffer.insert(r)\n    self.buffer = buffer\n"
    assert foreign_writes(fine, "harl/collect/x.py") == []
    assert foreign_writes("def f(buffer):\n    buffer.obs[0] = 1\n", "harl/buffers/x.py") == []


def test_the_cli_imports_only_the_public_api() -> None:
    """``harl/cli.py`` is argument parsing and dispatch over the public API (``harl compare``'s
    arguments and body live in its package's ``command`` module, a CLI-layer module)."""
    allowed = {"harl", "harl.api", "harl.cli_help", "harl.cli_rules", "harl.compare.command", "harl.errors"}
    assert [name for _, name in imports(HARL / "cli.py") if name not in allowed] == []


def folder_of(module: str) -> str:
    """The folder-level node of a module: ``harl.update.objectives.ppo`` -> ``harl.update``,
    ``harl.trainer`` -> ``harl.trainer`` (a top-level module is a node of its own)."""
    return ".".join(module.split(".")[:2])


def test_folders_do_not_depend_on_each_other_both_ways() -> None:
    """Taking each folder and top-level module of harl as one node, the import graph is acyclic
    (docs/architecture.md, "Layers"): the module rules above cannot see a cycle that runs
    through two different modules of one folder."""
    graph: dict[str, dict[str, str]] = {}
    for path in sorted(HARL.rglob("*.py")):
        here = folder_of(module_name(path))
        for line, name in imports(path):
            there = folder_of(name)
            if here not in ("harl", there) and there != "harl":
                graph.setdefault(here, {}).setdefault(there, f"{path.relative_to(HARL.parent)}:{line}")
    cycles, state = [], dict.fromkeys({*graph, *(t for v in graph.values() for t in v)}, 0)

    def visit(node: str, path: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(graph.get(node, {})):
            if state[nxt] == 1:
                ring = [*path[path.index(nxt):], nxt]
                cycles.append(" -> ".join(f"{a} ({graph[a][b]})" for a, b in zip(ring, ring[1:])))
            elif state[nxt] == 0:
                visit(nxt, [*path, nxt])
        state[node] = 2

    for name in sorted(state):
        if state[name] == 0:
            visit(name, [name])
    assert cycles == []


def test_nothing_outside_the_trainer_touches_its_private_members() -> None:
    """``trainer._x`` / ``self.trainer._x`` / ``trainers[i]._x`` outside harl/trainer.py: a population, a
    runner facade or a sweep reaches the Trainer through its public step functions only."""
    found = []
    for path in sorted(HARL.rglob("*.py")):
        if path.name == "trainer.py" and path.parent == HARL:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not (isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__")):
                continue
            base = node.value
            while isinstance(base, ast.Subscript):
                base = base.value
            name = base.attr if isinstance(base, ast.Attribute) else getattr(base, "id", "")
            if name in ("trainer", "trainers", "lead", "first"):
                found.append(f"{path.relative_to(HARL.parent)}:{node.lineno} {ast.unparse(node)}")
    assert found == []
