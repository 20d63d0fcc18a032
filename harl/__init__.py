"""harl: heterogeneous-agent RL as a pipeline of explicit, swappable stages."""


def __getattr__(name: str):  # noqa: ANN202 - lazy: `import harl` stays light (env workers import harl.envs)
    if name == "load_policy":
        from harl.inference import load_policy

        return load_policy
    raise AttributeError(f"module 'harl' has no attribute {name!r}")
