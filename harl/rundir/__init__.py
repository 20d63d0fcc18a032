"""A run directory's low-level parts: its layout (``files``), its lock, checkpoints written
atomically, and how a process answers stop signals.

The bottom floor of the run: env workers, sinks, the Trainer and the lifecycle
(``harl.run``) import it; it imports nothing of harl above ``harl.errors`` and ``harl.fs``.
Kept empty of imports: env workers import ``harl.rundir.signals`` and must not pull in
torch's training stack through this package.
"""
