"""The duplicate-code gate: pylint's similarity checker alone, with one set of options for
``nox -s lint``, ``.ci/run`` and ``tests/test_duplicates.py``.

``python tests/duplicate_check.py [PATH ...]`` (default ``harl``) exits non-zero and lists each
pair of modules sharing a run of ``MIN_LINES`` or more identical lines, imports, docstrings,
comments and ``def`` signatures left out.  Six is the issue-44 scan's threshold: a copied piece
of logic of six lines or more fails, while two config classes that happen to share a few
same-worded keys pass.  A pair that is alike on purpose says so with a module-level
``# pylint: disable=duplicate-code`` and a line on why (``grep -rn disable=duplicate-code harl``
lists them).
"""

from __future__ import annotations

import subprocess
import sys

MIN_LINES = 6

OPTIONS = (
    "--disable=all", "--enable=duplicate-code", f"--min-similarity-lines={MIN_LINES}",
    "--ignore-imports=yes", "--ignore-docstrings=yes", "--ignore-comments=yes", "--ignore-signatures=yes",
    "--score=no", "--persistent=no",
)


def command(paths: list[str]) -> list[str]:
    return [sys.executable, "-m", "pylint", *OPTIONS, *paths]


if __name__ == "__main__":
    sys.exit(subprocess.call(command(sys.argv[1:] or ["harl"])))
