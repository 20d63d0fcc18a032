"""Benchmark suites: ``harl suite SUITE.toml``, a file of entries (pipeline × seeds × budget ×
the metric and when it is read, an optional threshold, published reference numbers) run as
``--seeds`` sweeps through ``harl.sweep`` and reported through ``harl.compare`` and
``harl.plot``.  See docs/benchmarks.md.

Modules: ``spec`` (the suite file, validated), ``results`` (each entry's metric per seed and its
verdict), ``command`` (the command: the suite directory, its resume, the runs and the outputs).
"""

from harl.suite.spec import Entry, Reference, Suite, load_suite

__all__ = ["Entry", "Reference", "Suite", "load_suite"]
