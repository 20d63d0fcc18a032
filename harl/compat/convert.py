"""HARL's three dicts (or a HARL ``config.json``) -> a harl pipeline.

``convert`` reads a file or dicts; ``pipeline_from_harl`` takes what HARL's runners take. Both
check every key first (``harl.compat.checks``), fill what an older config lacks from HARL's
defaults, map each key by ``harl.compat.keys``' table and validate the result as harl validates a
pipeline file. The on-policy and off-policy tables are built by two plain functions below.
"""

from __future__ import annotations

import copy
import json
import random
from pathlib import Path
from typing import Any

import attrs

import harl.compat.keys as keys
from harl.compat.args import update_args
from harl.compat.checks import fixed_problem, type_problem, unknown_key
from harl.compat.data import ALGOS, ENVS, algo_defaults, env_defaults
from harl.compat.envs import EnvPart, convert_env
from harl.errors import ConfigError

ON_POLICY = {"happo": ("sequential", "ppo"), "hatrpo": ("sequential", "trpo"), "haa2c": ("sequential", "a2c"),
             "mappo": ("simultaneous", "ppo")}
OFF_POLICY = {"hasac": ("sequential", "sac"), "hatd3": ("sequential", "td3"), "haddpg": ("sequential", "ddpg"),
              "had3qn": ("sequential", "d3qn"), "maddpg": ("simultaneous", "ddpg"),
              "matd3": ("simultaneous", "td3")}
TWIN = {"sac": True, "td3": True, "ddpg": False}
BOX_ONLY = {"ddpg", "td3"}


@attrs.frozen
class Conversion:
    """A harl pipeline converted from a HARL config, with what the user should be told."""

    pipeline: dict[str, Any]
    """Raw pipeline tables, as ``harl.config.loading.structure_pipeline`` takes them."""
    notes: tuple[str, ...]
    """Ignored keys, filled-in keys, env substitutions: print each once."""
    source: str
    algo: str
    env: str
    task: str
    """HARL's task name (its results path: results/<env>/<task>/<algo>/<exp_name>)."""
    args: dict[str, Any]
    algo_args: dict[str, Any]
    env_args: dict[str, Any]
    """HARL's dicts as converted (defaults filled in): what HARL writes into its config.json."""
    model_dir: Path | None = None
    """The harl checkpoint ``train.model_dir`` names, to start from (None: fresh networks)."""

    def spec(self) -> Any:
        """The validated ``PipelineSpec``."""
        from harl.config.loading import structure_pipeline

        return structure_pipeline(copy.deepcopy(self.pipeline), self.source)

    def to_toml(self) -> str:
        """The pipeline as a TOML file, headed by where it came from and the notes."""
        from harl.compat.toml import pipeline_toml

        return pipeline_toml(self)


def read_config(path: str | Path) -> dict[str, Any]:
    """A HARL ``config.json`` (main_args, algo_args, env_args), or a ConfigError naming the file."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such HARL config file (HARL writes config.json into each results "
                          "directory; its tuned ones are in tuned_configs/)") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read the HARL config file ({exc})") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{path}: not a HARL config: it is not JSON ({exc.msg} at line {exc.lineno}, "
                          f"column {exc.colno}); HARL's config.json holds main_args, algo_args and "
                          "env_args. A harl pipeline (.toml) runs with harl train directly") from None
    if not isinstance(data, dict) or not {"main_args", "algo_args", "env_args"} <= set(data):
        have = ", ".join(sorted(data)) if isinstance(data, dict) else type(data).__name__
        raise ConfigError(f"{path}: not a HARL config: it needs the tables main_args, algo_args and "
                          f"env_args (it has: {have or 'nothing'}), as HARL's config.json files do")
    return data


def convert(config: str | Path | dict[str, Any], overrides: dict[str, Any] | None = None) -> Conversion:
    """A HARL ``config.json`` (a path, or its dict) -> a harl pipeline; ``overrides`` as HARL's
    ``--key value`` (``update_args`` meaning: a key sets that key wherever it is)."""
    if isinstance(config, (str, Path)):
        source = str(config)
        data = read_config(config)
    else:
        source = "HARL config"
        data = config
    args = dict(data["main_args"])
    return _convert(args, copy.deepcopy(data["algo_args"]), copy.deepcopy(data["env_args"]), source, overrides)


def pipeline_from_harl(algo: str, env: str, args: dict[str, Any] | None, algo_args: dict[str, Any],
                       env_args: dict[str, Any], overrides: dict[str, Any] | None = None) -> Conversion:
    """What HARL's runners take (``args``: algo, env, exp_name, load_config) -> a harl pipeline."""
    args = {"exp_name": "installtest", "load_config": "", **(args or {}), "algo": algo, "env": env}
    source = args.get("load_config") or f"HARL's {algo}/{env} config"
    return _convert(args, copy.deepcopy(algo_args), copy.deepcopy(env_args), str(source), overrides)


def _convert(args: dict[str, Any], algo_args: dict[str, Any], env_args: dict[str, Any], source: str,
             overrides: dict[str, Any] | None) -> Conversion:
    algo, env = args.get("algo"), args.get("env")
    if algo not in ALGOS:
        raise ConfigError(f"{source}: main_args.algo: {_name_problem('algorithm', algo, ALGOS)}")
    if env not in ENVS:
        raise ConfigError(f"{source}: main_args.env: {_name_problem('environment', env, ENVS)}")
    if env == "dexhands":
        convert_env(env, env_args, source)  # raises the dexhands paragraph
    if overrides:
        update_args(dict(overrides), algo_args, env_args)
    notes: list[str] = []
    values = _checked(algo, env, algo_args, env_args, source, notes)
    part = convert_env(env, {k[len(f"env:{env}."):]: v for k, v in values.items() if k.startswith("env:")},
                       source)
    notes.extend(part.notes)
    _check_pair(algo, env, part, source)
    build = _on_policy if algo in ON_POLICY else _off_policy
    try:
        tables = build(algo, values, part, notes)
    except ConfigError as exc:
        raise ConfigError(f"{source}: {exc}") from None
    tables["run"] = {"name": str(args.get("exp_name") or "installtest"), **tables["run"]}
    tables["logging"]["dir"] = str(Path(values["logger.log_dir"]) / env / part.task / algo)
    for table, entries in part.elsewhere.items():
        tables[table].update(entries)
    conversion = Conversion(tables, tuple(notes), source, algo, env, part.task, args, algo_args, env_args,
                            _model_dir(values["train.model_dir"], source))
    _validate(conversion)
    return conversion


def _name_problem(what: str, name: object, choices: tuple[str, ...]) -> str:
    import difflib

    near = difflib.get_close_matches(str(name), choices, n=1)
    hint = f'; did you mean "{near[0]}"?' if near else ""
    return f'unknown HARL {what} "{name}" (HARL\'s are: {", ".join(choices)}){hint}'


def _table(value: Any) -> dict[str, Any]:
    """A section of algo_args, or {} when it is not a table (reported as a problem already)."""
    return value if isinstance(value, dict) else {}


def _checked(algo: str, env: str, algo_args: dict[str, Any], env_args: dict[str, Any], source: str,
             notes: list[str]) -> dict[str, Any]:
    """Flat ``section.key -> value`` of every key, defaults filled in; all problems in one error."""
    problems: list[str] = []
    defaults = algo_defaults(algo)
    filled: list[str] = []
    ignored: list[str] = []
    values: dict[str, Any] = {}
    if not isinstance(algo_args, dict) or not isinstance(env_args, dict):
        raise ConfigError(f"{source}: algo_args and env_args must be dicts (tables), as in HARL's config.json")
    for section in algo_args:
        if section not in keys.ALGO_SECTIONS:
            problems.append(f"algo_args.{section}: {unknown_key('algo_args', section, list(keys.ALGO_SECTIONS))}")
        elif not isinstance(algo_args[section], dict):
            problems.append(f"algo_args.{section}: expected a table of keys, got {algo_args[section]!r}")
    sections: list[tuple[str, dict[str, Any], dict[str, Any]]] = [
        (s, _table(algo_args.get(s)), defaults.get(s, {})) for s in keys.ALGO_SECTIONS]
    sections.append((f"env:{env}", env_args, env_defaults(env)))
    for section, given, default in sections:
        known = keys.section_keys(section)
        where = "env_args" if section.startswith("env:") else f"algo_args.{section}"
        for key, value in given.items():
            path = f"{section}.{key}"
            if key not in known:
                problems.append(f"{where}.{key}: {unknown_key(where, key, known)}")
                continue
            if key not in default and not section.startswith("env:"):
                ignored.append(f"{section}.{key} (HARL's {algo} does not read it)")
                continue
            problem, value = type_problem(path, value)
            if problem is None:
                problem = fixed_problem(keys.BY_PATH[path], value)
            if problem is not None:
                problems.append(f"{where}.{key}: {problem}")
            values[path] = value
        for key, value in default.items():
            if key not in given:
                values[f"{section}.{key}"] = value
                filled.append(f"{section}.{key} = {json.dumps(value)}")
    if problems:
        raise ConfigError("\n".join(f"{source}: {p}" for p in problems))
    for path in values:
        entry = keys.BY_PATH.get(path)
        if entry is not None and entry.status == keys.IGNORED:
            ignored.append(f"{path} ({entry.what})")
    if filled:
        notes.append("not in the config, HARL's defaults used: " + ", ".join(filled))
    if ignored:
        notes.append("ignored (docs/harl-compat.md): " + "; ".join(ignored))
    return values


def _check_pair(algo: str, env: str, part: EnvPart, source: str) -> None:
    objective = (ON_POLICY.get(algo) or OFF_POLICY[algo])[1]
    if objective in BOX_ONLY and part.discrete:
        raise ConfigError(f"{source}: main_args.algo: {algo} needs continuous (Box) actions, and {env} "
                          f"{part.task} has discrete ones; use hasac (any action space), had3qn (discrete) "
                          "or an on-policy algorithm (happo, hatrpo, haa2c, mappo)")
    if objective == "d3qn" and part.discrete is False:
        raise ConfigError(f"{source}: main_args.algo: had3qn needs discrete actions, and {env} {part.task} "
                          "has continuous (Box) ones; use hasac, hatd3 or haddpg (continuous), or an "
                          "on-policy algorithm")


def _model_dir(value: Any, source: str) -> Path | None:
    if value is None or value == "":
        return None
    from harl.rundir.files import PATTERN, list_checkpoints

    path = Path(str(value))
    if path.is_file() and PATTERN.match(path.name):
        return path
    if path.is_dir() and list_checkpoints(path):
        return list_checkpoints(path)[-1]
    what = "does not exist" if not path.exists() else "holds no harl checkpoint (checkpoints/iter_N.pt)"
    raise ConfigError(f"{source}: algo_args.train.model_dir: {path} {what}. harl starts from a harl run "
                      "directory or one of its checkpoint files (runs/<run>/checkpoints/iter_N.pt); HARL's "
                      "own actor_agent*.pt / critic_agent*.pt files do not fit harl's networks. Set "
                      "model_dir to a harl run, or to null to start from fresh networks")


def _seed(v: dict[str, Any], notes: list[str]) -> int:
    if v["seed.seed_specify"]:
        return v["seed.seed"]
    seed = random.randint(1000, 9999)
    notes.append(f"seed.seed_specify is false: seed {seed} drawn (HARL draws one in [1000, 10000)); "
                 "it is in the pipeline, so the run can be repeated")
    return seed


def _common(v: dict[str, Any], part: EnvPart, notes: list[str]) -> dict[str, dict[str, Any]]:
    return {
        "run": {"seed": _seed(v, notes), "device": "auto" if v["device.cuda"] else "cpu",
                "torch_threads": v["device.torch_threads"]},
        "env": dict(part.table), "collector": {}, "buffer": {}, "returns": {}, "critic": {}, "updater": {},
        "policy": {}, "evaluator": {"episodes": v["eval.eval_episodes"], "n_envs": v["eval.n_eval_rollout_threads"],
                                    "deterministic": True, "counting": "first_finished"},
        "logging": {}, "checkpoint": {},
    }


def _on_policy(algo: str, v: dict[str, Any], part: EnvPart, notes: list[str]) -> dict[str, dict[str, Any]]:
    updater, objective = ON_POLICY[algo]
    t = _common(v, part, notes)
    t["run"]["total_env_steps"] = v["train.num_env_steps"]
    t["collector"] = {"kind": "on_policy", "rollout_length": v["train.episode_length"],
                      "n_envs": v["train.n_rollout_threads"]}
    t["buffer"] = {"kind": "rollout"}
    proper = v["train.use_proper_time_limits"]
    t["returns"] = {"kind": "gae", "gamma": v["algo.gamma"], "lam": v["algo.gae_lambda"] if v["algo.use_gae"] else 1.0,
                    "proper_time_limits": proper, "zero_truncated_advantage": proper}
    grad = v["algo.max_grad_norm"] if v["algo.use_max_grad_norm"] else 0.0
    t["critic"] = {
        "kind": "v", "state_type": "EP", "hidden_sizes": v["model.hidden_sizes"],
        "activation": v["model.activation_func"], "input_norm": v["model.use_feature_normalization"],
        "lr": v["model.critic_lr"], "adam_eps": v["model.opti_eps"], "epochs": v["algo.critic_epoch"],
        "minibatches": v["algo.critic_num_mini_batch"], "value_loss_coef": v["algo.value_loss_coef"],
        "clip_value_loss": v["algo.use_clipped_value_loss"], "value_clip": v["algo.clip_param"],
        "huber_delta": v["algo.huber_delta"] if v["algo.use_huber_loss"] else 0.0, "max_grad_norm": grad,
        "value_norm": v["train.use_valuenorm"],
    }
    t["updater"] = _updater(updater, v)
    if objective == "trpo":
        obj = {"kind": "trpo", "kl_threshold": v["algo.kl_threshold"], "ls_step": v["algo.ls_step"],
               "backtrack_coef": v["algo.backtrack_coeff"], "accept_ratio": v["algo.accept_ratio"]}
    else:
        obj = {"kind": objective, "epochs": v[f"algo.{'ppo' if objective == 'ppo' else 'a2c'}_epoch"],
               "minibatches": v["algo.actor_num_mini_batch"], "entropy_coef": v["algo.entropy_coef"],
               "lr": v["model.lr"], "adam_eps": v["model.opti_eps"], "max_grad_norm": grad}
        if objective == "ppo":
            obj["clip"] = v["algo.clip_param"]
    obj["action_aggregation"] = v["algo.action_aggregation"]
    t["updater"]["objective"] = obj
    recurrent = ("chunked" if v["model.use_recurrent_policy"]
                 else "naive" if v["model.use_naive_recurrent_policy"] else "none")
    t["policy"] = {"hidden_sizes": v["model.hidden_sizes"], "activation": v["model.activation_func"],
                   "input_norm": v["model.use_feature_normalization"], "std_x_coef": float(v["model.std_x_coef"]),
                   "std_y_coef": float(v["model.std_y_coef"]), "output_gain": v["model.gain"],
                   "share_parameters": v["algo.share_param"], "recurrent": recurrent,
                   "chunk_length": v["model.data_chunk_length"]}
    t["evaluator"]["every_iterations"] = v["train.eval_interval"] if v["eval.use_eval"] else 0
    return t


def _updater(kind: str, v: dict[str, Any]) -> dict[str, Any]:
    table = {"kind": kind, "lr_decay": "linear" if v["train.use_linear_lr_decay"] else "none"}
    if kind == "sequential":
        table["order"] = "fixed" if v["algo.fixed_order"] else "random"
    return table


def _off_policy(algo: str, v: dict[str, Any], part: EnvPart, notes: list[str]) -> dict[str, dict[str, Any]]:
    updater, objective = OFF_POLICY[algo]
    t = _common(v, part, notes)
    interval = v["train.train_interval"]
    t["run"]["total_env_steps"] = v["train.num_env_steps"] + v["train.warmup_steps"]
    t["collector"] = {"kind": "off_policy", "n_envs": v["train.n_rollout_threads"], "rollout_length": interval,
                      "updates_per_round": int(v["train.update_per_train"] * interval),
                      "warmup_steps": v["train.warmup_steps"]}
    if objective == "d3qn":  # HARL's constant epsilon, one coin per vector step
        t["collector"].update(epsilon_start=v["algo.epsilon"], epsilon_finish=v["algo.epsilon"],
                              epsilon_coin="per_step")
    t["buffer"] = {"kind": "replay", "capacity": v["algo.buffer_size"], "batch_size": v["algo.batch_size"],
                   "replacement": False}
    t["returns"] = {"kind": "n_step", "gamma": v["algo.gamma"], "n_step": v["algo.n_step"],
                    "proper_time_limits": v["train.use_proper_time_limits"]}
    t["updater"] = _updater(updater, v)
    if objective == "d3qn":
        dueling = _same_pair(v, "dueling_{}_hidden_sizes"), _same_pair(v, "dueling_{}_activation_func")
        t["critic"] = {"kind": "joint_q", "hidden_sizes": v["model.base_hidden_sizes"],
                       "activation": v["model.base_activation_func"], "dueling_hidden_sizes": dueling[0],
                       "dueling_activation": dueling[1], "lr": v["model.critic_lr"], "polyak": v["algo.polyak"]}
        t["updater"]["objective"] = {"kind": "d3qn", "lr": v["model.lr"], "dueling_hidden_sizes": dueling[0],
                                     "dueling_activation": dueling[1], "polyak": v["algo.polyak"]}
        t["policy"] = {"hidden_sizes": v["model.base_hidden_sizes"], "activation": v["model.base_activation_func"],
                       "input_norm": False}
    else:
        huber = v["algo.huber_delta"] if v.get("algo.use_huber_loss") else 0.0
        t["critic"] = {"kind": "q", "twin": TWIN[objective], "state_type": "EP",
                       "hidden_sizes": v["model.hidden_sizes"], "activation": v["model.activation_func"],
                       "lr": v["model.critic_lr"], "polyak": v["algo.polyak"], "huber_delta": huber,
                       "value_norm": bool(v.get("train.use_valuenorm", False))}
        obj: dict[str, Any] = {"kind": objective, "lr": v["model.lr"]}
        if objective == "sac":
            obj.update(alpha=v["algo.alpha"], auto_alpha=v["algo.auto_alpha"], alpha_lr=v["algo.alpha_lr"],
                       squash="act_limit")
        else:
            obj.update(expl_noise=v["algo.expl_noise"], polyak=v["algo.polyak"])
        if objective == "td3":
            obj.update(policy_noise=v["algo.policy_noise"], noise_clip=v["algo.noise_clip"],
                       policy_freq=v["algo.policy_freq"])
        t["updater"]["objective"] = obj
        norm = bool(objective == "sac" and part.discrete and v.get("model.use_feature_normalization"))
        t["policy"] = {"hidden_sizes": v["model.hidden_sizes"], "activation": v["model.activation_func"],
                       "input_norm": norm}
    every, rest = divmod(v["train.eval_interval"], interval)
    if rest or not every:
        every = max(1, round(v["train.eval_interval"] / interval))
        notes.append(f"train.eval_interval {v['train.eval_interval']} is not a multiple of train.train_interval "
                     f"{interval}: harl evaluates every {every} iterations ({every * interval} vector steps)")
    t["evaluator"]["every_iterations"] = every if v["eval.use_eval"] else 0
    return t


def _same_pair(v: dict[str, Any], pattern: str) -> Any:
    value, other = v[f"model.{pattern.format('v')}"], v[f"model.{pattern.format('a')}"]
    if value != other:
        raise ConfigError(f"algo_args.model.{pattern.format('a')}: harl's dueling value and advantage streams "
                          f"share one setting, so it must equal {pattern.format('v')} ({value!r}), "
                          f"not {other!r}; write the same value in both")
    return value


def _validate(conversion: Conversion) -> None:
    """harl's own validation of the pipeline; each line names the HARL key behind the harl key."""
    from harl.config.loading import structure_pipeline

    try:
        structure_pipeline(copy.deepcopy(conversion.pipeline), conversion.source)
    except ConfigError as exc:
        lines = []
        for line in str(exc).splitlines():
            where = line[len(conversion.source) + 2:].split(":", 1)[0]
            origin = ORIGINS.get(where.split(" ")[0])
            lines.append(f"{line} (converted from HARL's {origin})" if origin else line)
        raise ConfigError("\n".join(lines)) from None


ORIGINS: dict[str, str] = {
    "run.total_env_steps": "train.num_env_steps", "run.torch_threads": "device.torch_threads",
    "collector.n_envs": "train.n_rollout_threads",
    "collector.rollout_length": "train.episode_length (on-policy) / train.train_interval (off-policy)",
    "collector.warmup_steps": "train.warmup_steps",
    "collector.updates_per_round": "train.update_per_train", "buffer.capacity": "algo.buffer_size",
    "buffer.batch_size": "algo.batch_size", "returns.gamma": "algo.gamma", "returns.lam": "algo.gae_lambda",
    "returns.n_step": "algo.n_step", "critic.lr": "model.critic_lr", "critic.epochs": "algo.critic_epoch",
    "critic.minibatches": "algo.critic_num_mini_batch", "critic.value_clip": "algo.clip_param",
    "critic.huber_delta": "algo.huber_delta", "critic.max_grad_norm": "algo.max_grad_norm",
    "critic.polyak": "algo.polyak", "critic.hidden_sizes": "model.hidden_sizes",
    "critic.activation": "model.activation_func", "critic.adam_eps": "model.opti_eps",
    "critic.value_loss_coef": "algo.value_loss_coef", "policy.hidden_sizes": "model.hidden_sizes",
    "policy.activation": "model.activation_func", "policy.std_x_coef": "model.std_x_coef",
    "policy.std_y_coef": "model.std_y_coef", "policy.output_gain": "model.gain",
    "policy.chunk_length": "model.data_chunk_length", "policy.share_parameters": "algo.share_param",
    "updater.objective.lr": "model.lr", "updater.objective.clip": "algo.clip_param",
    "updater.objective.epochs": "algo.ppo_epoch / a2c_epoch", "updater.objective.minibatches":
    "algo.actor_num_mini_batch", "updater.objective.entropy_coef": "algo.entropy_coef",
    "updater.objective.adam_eps": "model.opti_eps", "updater.objective.max_grad_norm": "algo.max_grad_norm",
    "updater.objective.action_aggregation": "algo.action_aggregation",
    "updater.objective.kl_threshold": "algo.kl_threshold", "updater.objective.ls_step": "algo.ls_step",
    "updater.objective.backtrack_coef": "algo.backtrack_coeff",
    "updater.objective.accept_ratio": "algo.accept_ratio", "updater.objective.alpha": "algo.alpha",
    "updater.objective.alpha_lr": "algo.alpha_lr", "updater.objective.expl_noise": "algo.expl_noise",
    "updater.objective.policy_noise": "algo.policy_noise", "updater.objective.noise_clip": "algo.noise_clip",
    "updater.objective.policy_freq": "algo.policy_freq", "updater.objective.polyak": "algo.polyak",
    "collector.epsilon_start": "algo.epsilon", "collector.epsilon_finish": "algo.epsilon",
    "evaluator.episodes": "eval.eval_episodes", "evaluator.n_envs": "eval.n_eval_rollout_threads",
    "evaluator.every_iterations": "train.eval_interval", "run.seed": "seed.seed",
    "env.scenario": "env_args", "env.agent_conf": "env_args.agent_conf", "env.n_agents": "env_args.N",
    "env.max_episode_steps": "env_args.max_cycles (MPE) / episode_limit (MaMuJoCo)", "env.id": "env_args.scenario",
    "critic.state_type": "env_args.state_type",
}
"""harl key -> the HARL key it was converted from (for harl's validation messages)."""
