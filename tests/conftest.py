"""Test-wide settings."""

import torch

# Small MLPs on a 2-core machine: a second OpenMP thread only adds contention.
torch.set_num_threads(1)
