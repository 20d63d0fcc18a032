"""Train with HARL's command line on harl: the calls HARL's ``examples/train.py`` makes.

    python examples/harl_train.py --algo happo --env pettingzoo_mpe --exp_name test
    python examples/harl_train.py --load_config results/.../config.json --num_env_steps 20000

``--algo``, ``--env``, ``--exp_name`` and ``--load_config`` as in HARL; every other
``--key value`` pair overrides that key wherever it occurs in HARL's algo and env configs
(the value read as a Python literal, else as a string).  Like HARL's script it catches
nothing: importing ``harl.runners`` makes harl's own errors end as ``harl train`` does
(one paragraph, exit 2) and a Ctrl-C end after its checkpoint (exit 130).
"""

from __future__ import annotations

import argparse
import ast
import json
from typing import Any


def literal(text: str) -> Any:
    """``--key value``'s value: a Python literal (1e-4, True, [64, 64], None) or the string itself."""
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text


def parse(argv: list[str] | None = None) -> tuple[dict[str, Any], dict[str, Any]]:
    parser = argparse.ArgumentParser(formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--algo", default="happo", help="algorithm: a key of harl.runners.RUNNER_REGISTRY")
    parser.add_argument("--env", default="pettingzoo_mpe", help="HARL's env name")
    parser.add_argument("--exp_name", default="installtest", help="experiment name (a results sub-directory)")
    parser.add_argument("--load_config", default="", help="a config.json of an earlier run instead of the defaults")
    known, rest = parser.parse_known_args(argv)
    if len(rest) % 2:
        parser.error(f"overrides come as --key value pairs; {rest[-1]} has no value")
    overrides = {key.removeprefix("--"): literal(value) for key, value in zip(rest[0::2], rest[1::2])}
    return vars(known), overrides


def main(argv: list[str] | None = None) -> None:
    args, overrides = parse(argv)
    from harl.runners import RUNNER_REGISTRY

    if args["load_config"]:
        with open(args["load_config"], encoding="utf-8") as file:
            saved = json.load(file)
        args["algo"], args["env"] = saved["main_args"]["algo"], saved["main_args"]["env"]
        runner_class = RUNNER_REGISTRY[args["algo"]]
        algo_args, env_args = saved["algo_args"], saved["env_args"]
    else:
        runner_class = RUNNER_REGISTRY[args["algo"]]  # an unknown --algo is said before any loading
        from harl.utils.configs_tools import get_defaults_yaml_args

        algo_args, env_args = get_defaults_yaml_args(args["algo"], args["env"])
    from harl.utils.configs_tools import update_args

    update_args(overrides, algo_args, env_args)
    runner = runner_class(args, algo_args, env_args)
    runner.run()
    runner.close()


if __name__ == "__main__":
    main()
