"""What ``harl`` says about itself: its version, the command list a bare ``harl`` prints,
and the examples under ``harl train --help``."""

from __future__ import annotations

import argparse
from importlib.metadata import PackageNotFoundError, version

TRAIN_EXAMPLES = """\
examples:
  harl train pipelines/happo_mpe_spread.toml                       # HAPPO on MPE simple_spread
  harl train pipelines/happo_mpe_spread.toml --set updater.kind=simultaneous --set run.seed=3
  harl train --resume runs/happo-mpe-spread-s1-20261130-101500     # continue an interrupted run
"""


def harl_version() -> str:
    """The installed distribution's version (``unknown`` when run from an uninstalled tree)."""
    try:
        return version("harl")
    except PackageNotFoundError:
        return "unknown"


def command_list(parser: argparse.ArgumentParser) -> str:
    """``harl``'s commands, one line each, from the parser's own help strings."""
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    helps = {action.dest: action.help or "" for action in sub._choices_actions}
    width = max(map(len, helps))
    lines = [f"harl {harl_version()}: {parser.description}", "", "commands:"]
    lines += [f"  {name:<{width}}  {text}" for name, text in helps.items()]
    lines += ["", "harl COMMAND --help shows a command's options and examples; harl --help shows them all."]
    return "\n".join(lines)
