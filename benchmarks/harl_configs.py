"""Survey: every HARL tuned config (except dexhands) through harl's converter and ``harl check``.

    python benchmarks/harl_configs.py HARL_DIR [--cli]

HARL_DIR is a checkout of PKU-MARL/HARL (or its bare git directory). Each
``tuned_configs/<env>/<task>/<algo>/config.json`` is converted (``harl.compat.convert``); a
converted pipeline is then checked as ``harl check`` does (every stage built, nothing run;
``--cli`` runs ``python -m harl check`` on the written TOML instead, slower). Printed: the counts
of converted-and-valid, refused with a clear message (grouped by reason), valid but needing an
optional package that is not installed here, and tracebacks (which must be 0).
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import subprocess
import sys
import tempfile
import traceback
from pathlib import Path


def tuned_configs(harl_dir: Path) -> dict[str, dict]:
    """``env/task/algo`` -> the parsed config.json, from a checkout or a bare git directory."""
    found = {}
    if (harl_dir / "tuned_configs").is_dir():
        for path in sorted((harl_dir / "tuned_configs").rglob("config.json")):
            found[str(path.parent.relative_to(harl_dir / "tuned_configs"))] = json.loads(path.read_text())
        return found
    git = ["git", "-C", str(harl_dir)]
    names = subprocess.run([*git, "ls-tree", "-r", "--name-only", "HEAD", "tuned_configs"], check=True,
                           capture_output=True, text=True).stdout.split()
    for name in names:
        if name.endswith("/config.json"):
            text = subprocess.run([*git, "show", f"HEAD:{name}"], check=True, capture_output=True, text=True).stdout
            found[name.removeprefix("tuned_configs/").removesuffix("/config.json")] = json.loads(text)
    return found


def check(conversion, cli: bool) -> None:
    """Build every stage of the pipeline and close them (``harl check``), raising what it raises."""
    if cli:
        with tempfile.NamedTemporaryFile("w", suffix=".toml", delete=False) as out:
            out.write(conversion.to_toml())
        try:
            done = subprocess.run([sys.executable, "-m", "harl", "check", out.name], capture_output=True, text=True,
                                  env={**os.environ, "COLUMNS": "200"})
        finally:
            os.unlink(out.name)
        if done.returncode == 2:
            from harl.errors import HarlError

            raise HarlError(done.stdout.strip().splitlines()[-1] if done.stdout.strip() else done.stderr.strip())
        if done.returncode:
            raise RuntimeError(done.stderr[-2000:])
        return
    from harl.compose import build_stages

    stages = build_stages(conversion.spec(), conversion.source)
    stages.close()


def reason(message: str) -> str:
    """A group for a refusal: the key it names and the start of what it says."""
    first = message.splitlines()[0]
    parts = first.split(": ", 2)
    key, text = (parts[1], parts[2]) if len(parts) == 3 else ("", first)
    return f"{key}: {text[:90]}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("harl_dir", type=Path)
    parser.add_argument("--cli", action="store_true", help="run python -m harl check on each written TOML")
    parser.add_argument("--only", default="", help="only configs whose env/task/algo contains this")
    args = parser.parse_args()
    from harl.compat import convert
    from harl.errors import ConfigError, HarlError, MissingExtraError

    configs = {k: v for k, v in tuned_configs(args.harl_dir).items()
               if not k.startswith("dexhands/") and args.only in k}
    valid, refused, missing, tracebacks = [], collections.defaultdict(list), collections.defaultdict(list), []
    for name, config in configs.items():
        try:
            conversion = convert(config)
        except ConfigError as exc:
            refused[reason(str(exc))].append(name)
            continue
        except Exception:  # noqa: BLE001 - a survey counts bugs instead of stopping at the first
            tracebacks.append((name, traceback.format_exc()))
            continue
        try:
            check(conversion, args.cli)
        except MissingExtraError as exc:
            missing[str(exc)].append(name)
        except HarlError as exc:
            refused["harl check: " + reason(str(exc))].append(name)
        except Exception:  # noqa: BLE001
            tracebacks.append((name, traceback.format_exc()))
        else:
            valid.append(name)
        print(f"  {name}: {'ok' if name in valid else 'see below'}", file=sys.stderr, flush=True)
    n_refused = sum(len(v) for v in refused.values())
    n_missing = sum(len(v) for v in missing.values())
    print(f"HARL tuned configs (dexhands excluded): {len(configs)}")
    print(f"converted and valid (harl check built every stage): {len(valid)}")
    print(f"converted and valid, env package not installed here (not built): {n_missing}")
    for message, names in sorted(missing.items()):
        print(f"  {len(names):3d}  {message}")
    print(f"refused with a clear message: {n_refused}")
    for message, names in sorted(refused.items(), key=lambda item: -len(item[1])):
        print(f"  {len(names):3d}  {message}")
        print(f"       e.g. {', '.join(names[:3])}{' ...' if len(names) > 3 else ''}")
    print(f"tracebacks: {len(tracebacks)}")
    for name, text in tracebacks:
        print(f"--- {name}\n{text}")
    return 1 if tracebacks else 0


if __name__ == "__main__":
    sys.exit(main())
