"""HARL's configs read into harl pipelines: HARL's defaults (as data), its ``config.json`` files
and its three dicts (``args``, ``algo_args``, ``env_args``).

``convert(path_or_dict)`` and ``pipeline_from_harl(algo, env, args, algo_args, env_args)`` return a
``Conversion``: ``.pipeline`` (tables for ``harl.config.loading.structure_pipeline``), ``.notes``
(print each once), ``.spec()``, ``.to_toml()``. docs/harl-compat.md has the key table.
"""

from harl.compat.convert import Conversion, convert, pipeline_from_harl, read_config
from harl.compat.data import ALGOS, ENVS, algo_defaults, env_defaults

__all__ = ["ALGOS", "ENVS", "Conversion", "algo_defaults", "convert", "env_defaults", "pipeline_from_harl",
           "read_config"]
