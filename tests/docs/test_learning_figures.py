"""Every learning figure in the docs comes from the committed suite results or says where it came from.

docs/results.md is written by ``harl suite report benchmarks/results`` from the committed runs (its own
test, tests/suite/, checks the page against them). Every other learning figure carries a
*provenance label*: a commit of this repository in backticks (``measured at `abc1234```, with the
command beside it on the page) or a link to results.md.

A *learning figure* is, outside code blocks:

- a table whose header row (code spans removed) names a learning quantity (return, win, score,
  reward, rating, captures, eval..., train..., IQM, env steps, window) and whose body holds a
  figure (a signed number, a decimal or a percentage);
- a sentence of prose that names a return, win, reward, score or captures together with a signed
  decimal (``-61.2``), a rise between numbers (``0.61 → 1.28``, ``from -218 to -174``), or a win
  rate given in per cent;
- an image of a learning curve (LEARNING_CURVES).

The rule: each learning figure has a provenance label in its own section (no heading between
them), no more than SPAN lines before its first line or after its last; a label inside it counts.
A backticked commit must exist in this repository's history (checked where the checkout has it),
so a reference's commit (HARL's `d539bad`) is not taken for one.

Every PNG under docs/ is either a learning curve (LEARNING_CURVES: the page that shows it must
label it) or listed in OTHER_IMAGES with what it shows.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]
DOCS = ROOT / "docs"
SPAN = 20

GENERATED = {
    "docs/results.md": "written by harl suite report from benchmarks/results/ (checked against them in tests/suite)",
    "docs/compare-spread/results.md": "harl compare's tables, shown and labelled by docs/compare.md",
}
AWAITING: dict[str, str] = {}
"""Pages whose unlabelled figures are known and with their owners: xfail (not strict) until labelled."""

CS = "compare-spread/mpe_torch_simple_spread-"
COMPARE = (
    "f0822b2",
    "harl compare runs/spread-compare --reps 20000 --out docs/compare-spread (docs/compare.md)",
)
LEARNING_CURVES = {
    "happo_spread_2_seeds.png": (
        "565c254",
        "harl train pipelines/happo_mpe_spread.toml --seeds 1,2 --set run.total_env_steps=400_000 "
        "--set evaluator.every_iterations=4 --run-dir runs/spread-sweep; "
        "harl plot runs/spread-sweep --metric train_return --out docs/happo_spread_2_seeds.png (docs/runs.md)",
    ),
    "images_coop_pong_happo.png": (
        "1cc218b",
        "harl plot RUN_S1 RUN_S2 --metric train_return --smooth 40 of the runs measured at c6eb3e8 (docs/images.md)",
    ),
    "learning_parity_epymarl_ippo_lbf.png": (
        "2feae57",
        "python benchmarks/epymarl_parity.py --budget 500000 ... --png learning_parity_epymarl_ippo_lbf.png",
    ),
    "learning_parity_epymarl_ippo_lbf_seeds4_8.png": (
        "bd406dc",
        "python benchmarks/epymarl_parity.py --budget 250000 ... --png learning_parity_epymarl_ippo_lbf_seeds4_8.png",
    ),
    "learning_parity_happo_spread.png": (
        "becfb17",
        "not recorded (harl plot runs/parity --metric train_return draws its kind)",
    ),
    "learning_parity_mat_spread.png": ("4b615d4", "python benchmarks/mat_parity.py report --budget 160000"),
    "learning_parity_off_policy.png": (
        "1938a11",
        "python benchmarks/harl_parity.py figure runs/parity2 --png learning_parity_off_policy.png",
    ),
    "learning_parity_sable_smax_3m.png": ("74396c8", "python benchmarks/sable_mava_learning.py report --steps 327680"),
    "teams_smax_selfplay_rating.png": (
        "2d93d79",
        "harl plot runs/smax-sp-s1 --metric rating_allies (docs/teams.md)",
    ),
    "teams_smax_selfplay_win.png": ("2d93d79", "harl plot runs/smax-sp-s1 --metric eval_win (docs/teams.md)"),
    "teams_tag.png": (
        "6a33484",
        "python benchmarks/teams_tag.py runs/tag-s1 --out docs/teams_tag.png (docs/teams.md)",
    ),
    "tune_final_curves.png": (
        "ad8d0dd",
        "harl tune pipelines/happo_mpe_torch_spread.toml ... --final-seeds 101,102 (docs/tune.md)",
    ),
    "tune_history.png": (
        "ad8d0dd",
        "harl tune pipelines/happo_mpe_torch_spread.toml ... (docs/tune.md): Optuna's history",
    ),
    **{
        CS + name: COMPARE
        for name in (
            "absolute-aggregates.png",
            "absolute-improvement.png",
            "absolute-profile.png",
            "final-aggregates.png",
            "final-improvement.png",
            "final-profile.png",
            "sample_efficiency.png",
        )
    },
}
"""Each learning curve under docs/: the commit that last wrote it and the command that made it."""
OTHER_IMAGES = {
    "air_combat_2v2_shoot_missile.png": "the tracks of one 2v2 episode (harl render --format png3d), not a learning curve",
    "tune_importance.png": "Optuna's parameter importances, not a return",
}
RESULTS_IMAGES = "results/"
"""harl suite report's curves, shown by docs/results.md."""

HEADER = re.compile(
    r"(?i)return|\bwins?\b|win rate|score|reward|rating|\beval|\btrain|\biqm\b|captures|env steps(?!/s| per)|window"
)
NUMBER = re.compile(r"[-−+]\d|\d\.\d|\d\s?%")
WORD = re.compile(r"(?i)\b(returns?|win(s|ning)?|win rates?|rewards?|scores?d?|captures)\b")
CLAIM = re.compile(
    r"[-−]?\d[\d.,]*k?\s*(→|->)\s*[-−]?\d"  # 0.61 → 1.28
    r"|\bfrom (about )?[-−]?\d[\d.,]*k? (\w+ )?to (about )?[-−]?\d"  # from -218 to -174
    r"|(?<![\d.])[-−]\d+\.\d"  # -61.2 (not the end of a range 0.4-1.6)
)
WIN_PERCENT = re.compile(
    r"(?i)\bwin.{0,80}?\d\s?%(?!\s*(interval|CI|confidence))|\d\s?%(?!\s*(interval|CI|confidence)).{0,40}?\bwin"
)
IMAGE = re.compile(r"!\[[^\]]*\]\(([^)\s]+\.png)\)")
COMMIT = re.compile(r"`([0-9a-f]{7,40})`")
RESULTS_LINK = re.compile(r"\]\((?:\.\./)*results\.md(?:#[^)]*)?\)")
CODE_SPAN = re.compile(r"`[^`]*`")
SENTENCE = re.compile(r"(?<=[.;:])\s+(?=[A-Z(*])|\n\s*[-*] ")


def pages() -> list[str]:
    found = sorted(str(p.relative_to(ROOT)) for p in DOCS.rglob("*.md")) + ["README.md"]
    return [p for p in found if p not in GENERATED]


@cache
def known_commits(shas: frozenset[str]) -> frozenset[str] | None:
    """The shas that name a commit of this repository; None when the checkout cannot tell."""
    git = shutil.which("git")
    if git is None or not (ROOT / ".git").exists():
        return None
    shallow = subprocess.run(
        [git, "rev-parse", "--is-shallow-repository"], cwd=ROOT, capture_output=True, text=True
    )
    if shallow.returncode != 0 or shallow.stdout.strip() != "false":
        return None
    query = "".join(f"{sha}^{{commit}}\n" for sha in sorted(shas))
    out = subprocess.run(
        [git, "cat-file", "--batch-check"], cwd=ROOT, input=query, capture_output=True, text=True, check=True
    ).stdout.splitlines()
    return frozenset(sha for sha, line in zip(sorted(shas), out) if not line.endswith("missing"))


def blocks(lines: list[str]) -> list[tuple[str, int, int, int]]:
    """(kind, first line, last line, section) of each heading, table and paragraph outside code blocks."""
    out, fence, section, i = [], False, 0, 0
    while i < len(lines):
        line = lines[i]
        if line.lstrip().startswith("```"):
            fence = not fence
        elif not fence and line.startswith("#"):
            section += 1
        elif not fence and line.strip():
            j = i
            if line.startswith("|"):
                while j + 1 < len(lines) and lines[j + 1].startswith("|"):
                    j += 1
                out.append(("table", i, j, section))
            else:
                while (
                    j + 1 < len(lines)
                    and lines[j + 1].strip()
                    and not lines[j + 1].startswith(("#", "|", "```"))
                ):
                    j += 1
                out.append(("prose", i, j, section))
            i = j
        i += 1
    return out


def is_learning_figure(kind: str, lines: list[str]) -> bool:
    if kind == "table":
        return bool(HEADER.search(CODE_SPAN.sub("", lines[0])) and NUMBER.search("\n".join(lines[2:])))
    text = "\n".join(lines)
    if any(Path(target).name in {Path(c).name for c in LEARNING_CURVES} for target in IMAGE.findall(text)):
        return True
    for sentence in SENTENCE.split(CODE_SPAN.sub("", text)):
        if (WORD.search(sentence) and CLAIM.search(sentence)) or WIN_PERCENT.search(sentence):
            return True
    return False


def unlabelled(lines: list[str], name: str) -> list[str]:
    """The learning figures of a page's lines that have no provenance label, as "name:line: ..."."""
    found = blocks(lines)
    section_of = {n: section for _, first, last, section in found for n in range(first, last + 1)}
    shas = frozenset(sha for line in lines for sha in COMMIT.findall(line))
    commits = known_commits(shas) if shas else frozenset()
    labels = [
        n
        for n, line in enumerate(lines)
        if RESULTS_LINK.search(line) or any(commits is None or sha in commits for sha in COMMIT.findall(line))
    ]
    figures = [
        (kind, first, last, section)
        for kind, first, last, section in found
        if is_learning_figure(kind, lines[first : last + 1])
    ]

    claims = [
        (start, end)
        for kind, start, end, _ in figures
        if not (kind == "prose" and IMAGE.fullmatch("".join(lines[start : end + 1]).strip()))
    ]

    def between(n: int, first: int, last: int) -> bool:
        """A table or a claim (not an image) lies between line n and this figure."""
        return any((n < start and end < first) or (last < start and end < n) for start, end in claims)

    missing = []
    for kind, first, last, section in figures:
        if not any(
            section_of.get(n, section) == section
            and first - SPAN <= n <= last + SPAN
            and not between(n, first, last)
            for n in labels
        ):
            missing.append(f"{name}:{first + 1}: {kind} {lines[first][:100]!r}")
    return missing


@pytest.mark.parametrize("page", pages())
def test_every_learning_figure_is_labelled(page: str) -> None:
    missing = unlabelled((ROOT / page).read_text(encoding="utf-8").splitlines(), page)
    if page in AWAITING and missing:
        pytest.xfail(AWAITING[page])
    assert missing == [], (
        "a learning figure without a provenance label (a commit of this repository in backticks, "
        f"`measured at \\`abc1234\\``, or a link to results.md) within {SPAN} lines in its section:\n"
        + "\n".join(missing)
    )


def test_every_docs_image_is_classified() -> None:
    images = {p.relative_to(DOCS).as_posix() for p in DOCS.rglob("*.png")}
    unknown = sorted(
        i
        for i in images
        if i not in LEARNING_CURVES and i not in OTHER_IMAGES and not i.startswith(RESULTS_IMAGES)
    )
    assert unknown == [], (
        f"add each to LEARNING_CURVES (its commit and command; label it where a page shows it) or OTHER_IMAGES: {unknown}"
    )
    assert sorted((set(LEARNING_CURVES) | set(OTHER_IMAGES)) - images) == []


def test_each_learning_curve_names_the_commit_that_wrote_it() -> None:
    """A figure made again is committed again: its entry (and the label beside it) must move with it."""
    if known_commits(frozenset()) is None:
        pytest.skip("not a full git checkout")
    for image, (commit, command) in sorted(LEARNING_CURVES.items()):
        assert command
        last = subprocess.run(
            ["git", "log", "-1", "--format=%H", "--", f"docs/{image}"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        if last:  # committed (a figure not yet committed has no commit to name)
            assert last.startswith(commit), (
                f"docs/{image} was last written at {last[:7]}, its entry says {commit}"
            )


def test_the_rule_catches_a_removed_label() -> None:
    page = [
        "## Learning",
        "",
        "Seed 1, measured at LABEL with `harl train pipelines/happo_mpe_spread.toml`:",
        "",
        "![HAPPO on MPE simple_spread, 2 seeds](happo_spread_2_seeds.png)",
        "",
        "| env steps | eval return |",
        "|---|---|",
        "| 100k | -61.2 |",
        "",
        "The return rises from -75.5 to -62 (the same run, LABEL).",
        "",
        "## Next",
        "",
        "Its win rate was 85.3 % at 800k.",
    ]
    labelled = [line.replace("LABEL", "[Published results](results.md)") for line in page]
    # the last claim's section has no label
    assert unlabelled(labelled, "p") == ["p:15: prose 'Its win rate was 85.3 % at 800k.'"]
    without = [line.replace("LABEL", "an earlier commit") for line in page]
    assert [m.split(": ")[0] for m in unlabelled(without, "p")] == ["p:5", "p:7", "p:11", "p:15"]
    first_only = [
        line.replace("(the same run, LABEL)", "").replace("LABEL", "[results](results.md)") for line in page
    ]
    # the table lies between the first label and the claim after it
    assert [m.split(": ")[0] for m in unlabelled(first_only, "p")] == ["p:11", "p:15"]
    # a commit in backticks counts only when it is one of this repository's
    if known_commits(frozenset()) is not None:
        head = subprocess.run(
            ["git", "rev-parse", "--short=7", "HEAD"], cwd=ROOT, capture_output=True, text=True
        ).stdout.strip()
        assert len(unlabelled([line.replace("LABEL", f"`{head}`") for line in page], "p")) == 1
        assert len(unlabelled([line.replace("LABEL", "`0000000`") for line in page], "p")) == 4
    assert not is_learning_figure(
        "prose", ["Seed 1 took 98 s at load 0.4-1.6; win, loss and draw rates with 95% intervals."]
    )
    assert not is_learning_figure(
        "table", ["| run | env-steps/s | load |", "|---|---|---|", "| a | 1,234 | 2.5 |"]
    )
    assert not is_learning_figure(
        "table", ["| algorithm | collector | returns |", "|---|---|---|", "| HAPPO | on_policy | gae |"]
    )
