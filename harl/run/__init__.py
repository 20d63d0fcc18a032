"""The run lifecycle: start and resume (``lifecycle``), one run directory opened for reading
(``open_run``) and the checks a resume passes (``resume_check``).  Its low-level parts (the
layout, the lock, checkpoints, signals) are ``harl.rundir``.
"""
