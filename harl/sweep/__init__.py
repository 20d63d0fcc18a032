"""Sweeps: ``harl train PIPELINE --seeds 1-5 --grid KEY=V1,V2 ...``, the product of seeds and
grid values, each trial an ordinary run directory inside one sweep directory.

Trials run in this process (``--jobs 1``), in N local processes (``--jobs N``) or as Ray
tasks on a cluster (``--ray``); a trial is a function of its pipeline and seed only, so it
writes the same ``metrics.csv`` (wall-clock columns aside) whichever runs it.  Modules:
``grid`` (what runs), ``plan`` (the sweep directory, resume), ``trial`` (one trial in a
process), ``local`` and ``ray_backend`` (who runs them), ``state`` and ``report`` (status,
``trials.csv``, ``summary.csv`` and the end table).
"""
