"""Paper-quality comparisons of runs, after the cooperative-MARL evaluation protocol
(Gorsane et al. 2022) and rliable (Agarwal et al. 2021): IQM, mean, median and optimality gap
with stratified-bootstrap CIs, probability of improvement, performance profiles, sample-
efficiency curves, the absolute metric, and marl-eval's JSON.  See docs/compare.md.

Importing this package needs no extra; the statistics need ``pip install "harl[compare]"``
(rliable) and say so when it is missing.
"""

from harl.compare.absolute import absolute_metric
from harl.compare.bounds import Bound, load_bounds, parse_bounds
from harl.compare.marl_eval import check_marl_eval, export_results, read_results, to_marl_eval
from harl.compare.report import Comparison, compare, show
from harl.compare.runs import RunRecord, algorithm_of, load_runs, task_of

__all__ = ["Bound", "Comparison", "RunRecord", "absolute_metric", "algorithm_of", "check_marl_eval", "compare",
           "export_results", "load_bounds", "load_runs", "parse_bounds", "read_results", "show", "task_of",
           "to_marl_eval"]
