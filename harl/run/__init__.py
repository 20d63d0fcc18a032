"""The run lifecycle in one place: start and resume (``lifecycle``), one run directory opened
for reading (``open_run``), its layout (``files``), checkpoints, resume checks and signals.

Kept empty of imports: env workers import ``harl.run.signals`` and must not pull in torch's
training stack through this package.
"""
