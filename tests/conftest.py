"""Test-wide settings."""

import signal

import torch

# Small MLPs on a 2-core machine: a second OpenMP thread only adds contention.
torch.set_num_threads(1)

# A test suite started as a background job of a script (``cmd &``) inherits SIGINT ignored, and
# harl rightly keeps an ignored SIGINT ignored; the Ctrl-C tests need it delivered, in this
# process and in the runs they start.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)
