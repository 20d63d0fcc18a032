"""A converted pipeline written as a TOML file a user keeps (``harl convert CONFIG.json -o x.toml``)."""

from __future__ import annotations

import textwrap
from typing import Any

from harl.config.messages import toml_literal


def pipeline_toml(conversion: Any) -> str:
    """The pipeline's tables in harl's slot order, headed by the source and the notes as comments."""
    from harl.config.spec import TOP_SLOTS

    lines = [f"# {conversion.algo} on {conversion.env} {conversion.task}: converted from {conversion.source}",
             "# by harl.compat (docs/harl-compat.md maps every HARL key)."]
    for note in conversion.notes:
        lines.extend(textwrap.wrap(note, 100, initial_indent="# note: ", subsequent_indent="#   "))
    lines.append("")

    def table(name: str, content: dict[str, Any]) -> None:
        lines.append(f"[{name}]")
        nested = []
        for key, value in content.items():
            if isinstance(value, dict):
                nested.append((f"{name}.{key}", value))
            elif value is not None:
                lines.append(f"{key} = {toml_literal(value)}")
        lines.append("")
        for sub_name, sub in nested:
            table(sub_name, sub)

    for slot in TOP_SLOTS:
        if conversion.pipeline.get(slot):
            table(slot, conversion.pipeline[slot])
    return "\n".join(lines)
