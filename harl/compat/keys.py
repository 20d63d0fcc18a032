"""Every key of HARL's configs and what harl does with it: the table behind the converter,
its notes and docs/harl-compat.md.

A key is ``mapped`` (to the harl keys named), ``fixed`` (harl has that behaviour built in: the
value HARL ships is accepted, any other is refused with the reason), ``ignored`` (no effect in
harl; reported once as a note, with the reason) or ``refused`` (harl cannot do it at all).
"""

from __future__ import annotations

import attrs

MAPPED, FIXED, IGNORED, REFUSED = "mapped", "fixed", "ignored", "refused"


@attrs.frozen
class Key:
    """One key of HARL's config: where it goes in harl, or why it goes nowhere."""

    path: str
    """``section.key`` of ``algo_args`` (``train.num_env_steps``) or ``env:<env>.key`` of ``env_args``."""
    status: str
    what: str
    """mapped: the harl keys it sets; otherwise the reason."""
    accepts: tuple = ()
    """fixed: the values harl accepts."""


def _k(path: str, status: str, what: str, *accepts: object) -> Key:
    return Key(path, status, what, tuple(accepts))


ALGO_KEYS: tuple[Key, ...] = (
    _k("seed.seed_specify", MAPPED, "run.seed (false: a seed drawn once in [1000, 10000), as HARL draws, "
       "and written into the pipeline)"),
    _k("seed.seed", MAPPED, "run.seed"),
    _k("device.cuda", MAPPED, 'run.device ("auto" for true: CUDA where there is one, as HARL; "cpu" for false)'),
    _k("device.torch_threads", MAPPED, "run.torch_threads"),
    _k("device.cuda_deterministic", IGNORED, "harl sets no cuDNN flags: its CPU runs are reproducible "
       "from the seed; on CUDA set torch.backends.cudnn.deterministic yourself"),
    _k("train.n_rollout_threads", MAPPED, "collector.n_envs"),
    _k("train.num_env_steps", MAPPED, "run.total_env_steps (off-policy: plus warmup_steps, because HARL "
       "counts its budget after the warm-up and harl counts it from the start)"),
    _k("train.episode_length", MAPPED, "collector.rollout_length"),
    _k("train.log_interval", IGNORED, "harl logs every iteration to metrics.csv and its progress display"),
    _k("train.eval_interval", MAPPED, "evaluator.every_iterations (off-policy: eval_interval / "
       "train_interval, since HARL counts vector steps there)"),
    _k("train.use_valuenorm", MAPPED, "critic.value_norm"),
    _k("train.use_linear_lr_decay", MAPPED, 'updater.lr_decay ("linear" / "none")'),
    _k("train.use_proper_time_limits", MAPPED, "returns.proper_time_limits; on-policy also "
       "returns.zero_truncated_advantage (HARL's GAE zeroes a truncated step's advantage)"),
    _k("train.model_dir", MAPPED, "the checkpoint the run starts from (a harl run directory or "
       "checkpoint file; HARL's own .pt files are refused)"),
    _k("train.warmup_steps", MAPPED, "collector.warmup_steps"),
    _k("train.train_interval", MAPPED, "collector.rollout_length (off-policy: vector steps per iteration)"),
    _k("train.update_per_train", MAPPED, "collector.updates_per_round (= update_per_train x train.train_interval)"),
    _k("eval.use_eval", MAPPED, "evaluator.every_iterations (false: 0; harl still evaluates once at the end)"),
    _k("eval.n_eval_rollout_threads", MAPPED, "evaluator.n_envs"),
    _k("eval.eval_episodes", MAPPED, "evaluator.episodes"),
    _k("render.use_render", FIXED, "HARL's render mode replaces training; harl films a run with "
       "harl render RUN_DIR --episodes N", False),
    _k("render.render_episodes", IGNORED, "used only by HARL's render mode; harl render --episodes N films a run"),
    _k("model.hidden_sizes", MAPPED, "policy.hidden_sizes, critic.hidden_sizes"),
    _k("model.activation_func", MAPPED, "policy.activation, critic.activation"),
    _k("model.use_feature_normalization", MAPPED, "policy.input_norm, critic.input_norm (on-policy); "
       "policy.input_norm for HASAC with Discrete actions (HARL's other off-policy networks have no "
       "feature normalisation)"),
    _k("model.initialization_method", FIXED, "harl initialises on-policy networks orthogonally, as "
       "HARL's default; off-policy networks keep PyTorch's initialisation, as HARL's", "orthogonal_"),
    _k("model.gain", MAPPED, "policy.output_gain (on-policy; HARL's off-policy actors do not read it)"),
    _k("model.use_naive_recurrent_policy", MAPPED, 'policy.recurrent = "naive"'),
    _k("model.use_recurrent_policy", MAPPED, 'policy.recurrent = "chunked"'),
    _k("model.recurrent_n", FIXED, "harl's recurrent policy has one GRU layer", 1),
    _k("model.data_chunk_length", MAPPED, "policy.chunk_length"),
    _k("model.lr", MAPPED, "updater.objective.lr (HATRPO has no actor optimiser, in HARL as in harl)"),
    _k("model.critic_lr", MAPPED, "critic.lr"),
    _k("model.opti_eps", MAPPED, "updater.objective.adam_eps, critic.adam_eps"),
    _k("model.weight_decay", FIXED, "harl's Adam optimisers have no weight decay", 0),
    _k("model.std_x_coef", MAPPED, "policy.std_x_coef"),
    _k("model.std_y_coef", MAPPED, "policy.std_y_coef"),
    _k("model.final_activation_func", FIXED, "harl's off-policy actors end their MLP in tanh, as HARL's "
       "shipped configs", "tanh"),
    _k("model.base_hidden_sizes", MAPPED, "policy.hidden_sizes, critic.hidden_sizes (HAD3QN)"),
    _k("model.base_activation_func", MAPPED, "policy.activation, critic.activation (HAD3QN)"),
    _k("model.dueling_v_hidden_sizes", MAPPED, "updater.objective.dueling_hidden_sizes, "
       "critic.dueling_hidden_sizes (the value and advantage streams share one setting in harl: "
       "dueling_a_hidden_sizes must equal it)"),
    _k("model.dueling_a_hidden_sizes", MAPPED, "as dueling_v_hidden_sizes"),
    _k("model.dueling_v_activation_func", MAPPED, "updater.objective.dueling_activation, "
       "critic.dueling_activation (dueling_a_activation_func must equal it)"),
    _k("model.dueling_a_activation_func", MAPPED, "as dueling_v_activation_func"),
    _k("algo.ppo_epoch", MAPPED, "updater.objective.epochs"),
    _k("algo.a2c_epoch", MAPPED, "updater.objective.epochs"),
    _k("algo.critic_epoch", MAPPED, "critic.epochs"),
    _k("algo.use_clipped_value_loss", MAPPED, "critic.clip_value_loss"),
    _k("algo.clip_param", MAPPED, "updater.objective.clip (PPO), critic.value_clip (HARL's V critic "
       "clips with it too)"),
    _k("algo.actor_num_mini_batch", MAPPED, "updater.objective.minibatches"),
    _k("algo.critic_num_mini_batch", MAPPED, "critic.minibatches"),
    _k("algo.entropy_coef", MAPPED, "updater.objective.entropy_coef"),
    _k("algo.value_loss_coef", MAPPED, "critic.value_loss_coef"),
    _k("algo.use_max_grad_norm", MAPPED, "false: updater.objective.max_grad_norm = critic.max_grad_norm = 0"),
    _k("algo.max_grad_norm", MAPPED, "updater.objective.max_grad_norm, critic.max_grad_norm"),
    _k("algo.use_gae", MAPPED, "returns.lam (false: 1.0, HARL's discounted returns minus the value)"),
    _k("algo.gamma", MAPPED, "returns.gamma"),
    _k("algo.gae_lambda", MAPPED, "returns.lam"),
    _k("algo.use_huber_loss", MAPPED, "critic.huber_delta (false: 0, squared error)"),
    _k("algo.huber_delta", MAPPED, "critic.huber_delta"),
    _k("algo.use_policy_active_masks", FIXED, "harl always averages losses over the active (alive) "
       "agents' steps", True),
    _k("algo.action_aggregation", MAPPED, "updater.objective.action_aggregation"),
    _k("algo.share_param", MAPPED, "policy.share_parameters"),
    _k("algo.fixed_order", MAPPED, 'updater.order ("fixed" / "random"; MA updaters have no order, as in HARL)'),
    _k("algo.kl_threshold", MAPPED, "updater.objective.kl_threshold"),
    _k("algo.ls_step", MAPPED, "updater.objective.ls_step"),
    _k("algo.accept_ratio", MAPPED, "updater.objective.accept_ratio"),
    _k("algo.backtrack_coeff", MAPPED, "updater.objective.backtrack_coef"),
    _k("algo.buffer_size", MAPPED, "buffer.capacity"),
    _k("algo.batch_size", MAPPED, "buffer.batch_size"),
    _k("algo.polyak", MAPPED, "critic.polyak, updater.objective.polyak (DDPG, TD3, D3QN)"),
    _k("algo.n_step", MAPPED, "returns.n_step"),
    _k("algo.expl_noise", MAPPED, "updater.objective.expl_noise"),
    _k("algo.policy_noise", MAPPED, "updater.objective.policy_noise"),
    _k("algo.noise_clip", MAPPED, "updater.objective.noise_clip"),
    _k("algo.policy_freq", MAPPED, "updater.objective.policy_freq"),
    _k("algo.alpha", MAPPED, "updater.objective.alpha"),
    _k("algo.auto_alpha", MAPPED, "updater.objective.auto_alpha"),
    _k("algo.alpha_lr", MAPPED, "updater.objective.alpha_lr"),
    _k("algo.epsilon", MAPPED, "collector.epsilon_start, epsilon_finish (constant, as HARL)"),
    _k("logger.log_dir", MAPPED, "logging.dir, with HARL's <env>/<task>/<algo> below it"),
)

ENV_KEYS: tuple[Key, ...] = (
    _k("env:pettingzoo_mpe.scenario", MAPPED, 'env.scenario without the version, env.variant = '
       '"pettingzoo_1.22" (HARL\'s MPE physics and reward scale)'),
    _k("env:pettingzoo_mpe.continuous_actions", MAPPED, "env.continuous_actions"),
    _k("env:pettingzoo_mpe.max_cycles", MAPPED, "env.max_episode_steps"),
    _k("env:pettingzoo_mpe.N", MAPPED, "env.n_agents"),
    _k("env:pettingzoo_mpe.local_ratio", MAPPED, "env.local_ratio"),
    _k("env:mamujoco.scenario", MAPPED, "env.scenario without the version (harl steps gymnasium-robotics' "
       "MuJoCo v5 models; manyagent_swimmer / manyagent_ant become ManySegmentSwimmer / ManySegmentAnt)"),
    _k("env:mamujoco.agent_conf", MAPPED, "env.agent_conf"),
    _k("env:mamujoco.agent_obsk", MAPPED, "env.agent_obsk (unused, as in HARL: a converted config sets "
       'env.observation = "harl", every agent seeing the whole robot and its id, and env.clip_actions = false)'),
    _k("env:mamujoco.episode_limit", MAPPED, "env.max_episode_steps"),
    _k("env:gym.scenario", MAPPED, "env.id (a MuJoCo -v2/-v3/-v4 id becomes gymnasium's -v5)"),
    _k("env:football.env_name", MAPPED, "env.scenario"),
    _k("env:football.representation", MAPPED, "env.representation"),
    _k("env:football.rewards", MAPPED, "env.rewards"),
    _k("env:football.stacked", FIXED, "harl's football observations are single frames", False),
    _k("env:football.write_goal_dumps", FIXED, "harl writes no gfootball dumps; film a run with harl render",
       False),
    _k("env:football.write_full_episode_dumps", FIXED, "harl writes no gfootball dumps; film a run with "
       "harl render", False),
    _k("env:football.render", FIXED, "training does not render in harl; film a run with harl render", False),
    _k("env:football.write_video", FIXED, "harl writes no gfootball videos; film a run with harl render", False),
    _k("env:football.dump_frequency", IGNORED, "used only by gfootball's dumps, which harl does not write"),
    _k("env:football.logdir", IGNORED, "used only by gfootball's dumps, which harl does not write"),
    _k("env:football.channel_dimensions", IGNORED, "used only by gfootball's pixel representations; "
       "harl reads the 115-float ones"),
    _k("env:football.extra_players", FIXED, "harl plays the academy scenarios as gfootball defines them", None),
    _k("env:football.number_of_left_players_agent_controls", MAPPED, "checked against the scenario's "
       "agent count (harl.envs.football.SCENARIOS, HARL's counts)"),
    _k("env:football.number_of_right_players_agent_controls", FIXED, "harl controls the left team only", 0),
    _k("env:football.other_config_options", FIXED, "harl passes no extra gfootball options", None),
    _k("env:lag.scenario", MAPPED, "checked against the task (SingleControl 1/..., SingleCombat 1v1/..., "
       "MultipleCombat 2v2/...)"),
    _k("env:lag.task", MAPPED, "env.task, HARL's name as it is (lag.yaml's six tasks and HARL's self-play "
       'configs; self-play ones with sides = "one_team")'),
    _k("env:smac.map_name", MAPPED, "env.scenario on SMAX (kind smax) where SMAX has the map; refused otherwise"),
    _k("env:smac.state_type", MAPPED, "critic.state_type"),
    _k("env:smacv2.map_name", MAPPED, "env.scenario on SMAX where SMAX has the map (its smacv2_N_units); "
       "HARL's race maps are refused"),
    _k("env:dexhands.task", REFUSED, "Bi-DexHands needs Isaac Gym (see the dexhands paragraph)"),
    _k("env:dexhands.hands_episode_length", REFUSED, "Bi-DexHands needs Isaac Gym"),
)

MAIN_KEYS: tuple[Key, ...] = (
    _k("main.algo", MAPPED, "the stage kinds (collector, critic, updater, objective)"),
    _k("main.env", MAPPED, "env.kind"),
    _k("main.exp_name", MAPPED, "run.name"),
    _k("main.load_config", IGNORED, "where HARL read the dicts from; the conversion already has them"),
)

ALL_KEYS: tuple[Key, ...] = (*MAIN_KEYS, *ALGO_KEYS, *ENV_KEYS)
BY_PATH: dict[str, Key] = {k.path: k for k in ALL_KEYS}
ALGO_SECTIONS: tuple[str, ...] = ("seed", "device", "train", "eval", "render", "model", "algo", "logger")


def section_keys(section: str) -> list[str]:
    """Every key name harl knows in one section of ``algo_args`` (``"train"``) or env (``"env:smac"``)."""
    prefix = section + "."
    return [k.path[len(prefix):] for k in ALL_KEYS if k.path.startswith(prefix)]


def counts() -> dict[str, int]:
    """How many keys have each status (the numbers in docs/harl-compat.md)."""
    out = {MAPPED: 0, FIXED: 0, IGNORED: 0, REFUSED: 0}
    for key in ALL_KEYS:
        out[key.status] += 1
    return out
