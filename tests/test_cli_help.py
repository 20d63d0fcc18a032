"""harl.cli_help: a bare ``harl`` lists the commands, ``--version``, examples under every command's ``--help``."""

from __future__ import annotations

from importlib.metadata import version

import pytest

from harl.cli import main


def test_bare_harl_lists_the_commands(capsys: pytest.CaptureFixture[str]) -> None:
    """``harl`` alone prints each command with its one-line help and exits 0 (no usage error)."""
    assert main([]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"harl {version('harl')}: Heterogeneous-agent RL as a pipeline of swappable stages."
    helps = dict(line.split(None, 1) for line in out[3:] if line.startswith("  "))
    assert helps["train"] == "train a pipeline, or resume a run"
    assert helps["check"] == "validate a pipeline and build every stage, run nothing"
    assert list(helps) == ["train", "check", "stages", "eval", "crossplay", "plot", "render", "export", "convert",
                           "compare", "export-results", "tune", "suite"]
    assert out[-1] == "harl COMMAND --help shows a command's options and examples."


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    """``harl --version`` prints the installed version and exits 0."""
    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0
    assert capsys.readouterr().out == f"harl {version('harl')}\n"


def test_train_help_shows_examples(capsys: pytest.CaptureFixture[str]) -> None:
    """``harl train --help`` ends with three examples: train, swap a stage, resume."""
    with pytest.raises(SystemExit) as exit_:
        main(["train", "--help"])
    assert exit_.value.code == 0
    out = capsys.readouterr().out
    examples = out[out.index("examples:\n"):].splitlines()[1:]
    assert [line.split()[:3] for line in examples] == [
        ["harl", "train", "pipelines/happo_mpe_spread.toml"],
        ["harl", "train", "pipelines/happo_mpe_spread.toml"],
        ["harl", "train", "--resume"],
    ]
    assert "--set updater.kind=simultaneous" in examples[1]


@pytest.mark.parametrize("command", ["train", "check", "stages", "eval", "plot", "render", "export", "convert",
                                     "compare", "export-results", "tune", "suite"])
def test_every_commands_help_shows_examples_of_itself(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    """The README promises examples under ``harl COMMAND --help``: each command has some, of itself."""
    with pytest.raises(SystemExit) as exit_:
        main([command, "--help"])
    assert exit_.value.code == 0
    out = capsys.readouterr().out
    examples = out[out.index("\nexamples"):]
    assert f"  harl {command} " in examples


@pytest.mark.parametrize(("command", "extra"), [("compare", "compare"), ("tune", "tune"), ("plot", "plot")])
def test_a_command_that_needs_an_extra_names_it_in_its_help(command: str, extra: str,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main([command, "--help"])
    assert f'pip install "harl[{extra}]"' in " ".join(capsys.readouterr().out.split())


def test_no_help_text_shows_a_doubled_percent(capsys: pytest.CaptureFixture[str]) -> None:
    """argparse %-formats an option's help but not a description or an epilog: no ``--help`` of any
    command (nor the bare command list) shows ``%%`` (``harl crossplay --help`` once said "95%% intervals")."""
    from harl.cli_help import parser

    sub = next(a for a in parser()._actions if a.dest == "command")
    commands = list(sub.choices)  # type: ignore[arg-type]
    assert "crossplay" in commands
    main([])
    shown = {"harl": capsys.readouterr().out}
    for command in commands:
        with pytest.raises(SystemExit):
            main([command, "--help"])
        shown[command] = capsys.readouterr().out
    assert {name: text.count("%%") for name, text in shown.items() if "%%" in text} == {}
    assert "95% intervals" in " ".join(shown["crossplay"].split())
    assert "95% confidence intervals" in " ".join(shown["eval"].split())
