"""MkDocs hook: the stage reference pages (``reference/<slot>.md``), generated at every build
from the same description ``harl stages`` prints, so the two cannot disagree.

``stage_rows`` is the one call into harl; point it wherever ``harl stages`` reads from.
Nothing here is written to disk: the pages exist only in the built site.
"""

from __future__ import annotations

from typing import Any

from harl.cli import _summary
from harl.config.dump import describe_stages
from harl.config.dump import title as stage_title

Row = tuple[str, "str | None", type, list[tuple[str, str, str, str]]]


def stage_rows() -> list[Row]:
    """(slot, kind, config class, [(key, type, default, meaning)]): what ``harl stages`` lists."""
    return describe_stages()


def page_name(slot: str) -> str:
    """``updater.objective`` -> ``reference/updater-objective.md``."""
    return f"reference/{slot.replace('.', '-')}.md"


def cell(text: str) -> str:
    """A table cell: pipes escaped, line breaks folded."""
    return " ".join(text.split()).replace("|", "\\|")


def kind_section(slot: str, kind: str | None, cls: type, keys: list[tuple[str, str, str, str]]) -> str:
    """One kind: a heading named after it, the table line that picks it, its docstring, its keys."""
    title = stage_title(slot, kind)
    summary = _summary(cls.__doc__ or "", title)
    lines = [f"## {kind}", ""] if kind else []
    lines += [f"`{title}`" + (f": {summary}" if summary else ""), ""]
    if not keys:
        return "\n".join([*lines, "No keys besides `kind`.", ""])
    lines += ["| key | type | default | meaning |", "|---|---|---|---|"]
    lines += [f"| `{key}` | {cell(type_)} | `{cell(default)}` | {cell(doc)} |" for key, type_, default, doc in keys]
    return "\n".join([*lines, ""])


def slot_page(slot: str, rows: list[Row]) -> str:
    kinds = [kind for s, kind, _, _ in rows if s == slot and kind]
    head = [f"# [{slot}]", ""]
    if kinds:
        key = stage_title(slot, "...").partition("] ")[2]  # kind = "...", or a team's role = "..."
        head += [f"Kinds: {', '.join(f'[`{k}`](#{k})' for k in kinds)}. Pick one with `{key}`; "
                 f"`harl stages {slot}` prints this page in the terminal.", ""]
    else:
        head += [f"`harl stages {slot}` prints this page in the terminal.", ""]
    return "\n".join(head + [kind_section(*row) for row in rows if row[0] == slot])


def index_page(rows: list[Row]) -> str:
    slots = list(dict.fromkeys(slot for slot, *_ in rows))
    lines = ["# Stage reference", "",
             "Every table of a pipeline file, every kind and every key with its type, default and "
             "meaning. These pages are generated when the site is built, from the same description "
             "`harl stages` prints (`harl stages ppo` for one kind), so they always match the code.", "",
             "| table | kinds |", "|---|---|"]
    for slot in slots:
        kinds = [kind for s, kind, _, _ in rows if s == slot and kind]
        link = f"[`[{slot}]`]({page_name(slot).removeprefix('reference/')})"
        lines.append(f"| {link} | {', '.join(f'`{k}`' for k in kinds) or '(one kind)'} |")
    return "\n".join([*lines, ""])


def pages() -> dict[str, str]:
    """Every generated page: path under docs/ -> markdown."""
    rows = stage_rows()
    out = {"reference/index.md": index_page(rows)}
    for slot in dict.fromkeys(slot for slot, *_ in rows):
        out[page_name(slot)] = slot_page(slot, rows)
    return out


def on_files(files: Any, config: Any) -> Any:
    """Add the generated pages to the site's files (mkdocs >= 1.6)."""
    from mkdocs.structure.files import File

    for path, text in pages().items():
        files.append(File.generated(config, path, content=text))
    return files
