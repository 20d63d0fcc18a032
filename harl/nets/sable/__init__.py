"""Sable (Mahjoub et al., ICML 2025, arXiv 2410.01706) in PyTorch: the retention foundation.

Done here, mirroring Mava's JAX implementation (instadeepai/Mava, branch feat/sable, 73c4611):

* ``decay``: per-head kappas and the multi-agent decay matrix, xi and chunk carry with resets
  at episode starts (mava/networks/retention.py:103-191, 209-213);
* ``positional``: the optional timestep sinusoid (mava/utils/sable_utils.py:96-140);
* ``retention``: gated multi-scale retention, parallel / chunkwise / recurrent, and the carried
  state's shape (mava/networks/retention.py:26-304, mava/utils/sable_utils.py:72-93).

Departures from 73c4611, each following Mava's later retention.py (head outputs joined into
(B, S, E), W_G and W_O of (E, E), the decoder state carried agent by agent):

* 73c4611 writes every head's output into the slice [head_size:head_size+1] of a head_size-wide
  array (retention.py:264, 292), a write JAX drops silently: its retention output is all zeros
  (checked by running it). Here head h fills features [h*hs, (h+1)*hs).
* 73c4611's autoregressive_act hands every agent the timestep's starting state
  (discrete_trainer_executor.py:307-313), which the causal training form does not match; here
  the decoder's recurrent call carries the state from agent to agent.
* GroupNorm has one group per head over the joined (B*S, E) output; the later Mava normalises
  (B*S*H, hs) rows in n_head groups, which differs only when n_head > 1.

With 73c4611's slice fixed and n_head=1, its MultiScaleRetention and this one agree to 1e-7
(float32 weights) on a sequence with a mid-chunk reset and a carried state, encoder and decoder.

Next pieces: the encoder/decoder network (RMSNorm, SwiGLU, obs/action encoders, value and
action heads: mava/networks/sable_network.py, mava/utils/sable_utils.py:27-53, and the
train/act functions of mava/networks/utils/sable/discrete_trainer_executor.py); the ff variant
(no decay, state summed, chunks over agents: retention.py:69-72, where 73c4611's ones also
drop the decoder's causal mask and the later Mava keeps it; configs/network/ff_retention.yaml) and the
rec variant (rec_retention.yaml: timestep_chunk_size 32); the joint updater objective (PPO,
mava/systems/sable/anakin/{ff,rec}_sable.py) with per-step values and states in the step record's
extras as MAT's ride; pipelines with Mava's defaults (configs/system/sable/*.yaml: lr 2.5e-4,
rollout 128, 4 epochs, 2 minibatches, clip 0.2, ent 0.01, vf 0.5, grad norm 0.5); and a replay
parity check against Mava.

Mava's network defaults (configs/network/{ff,rec}_retention.yaml): n_block 1, embed_dim 64,
n_head 1, decay_scaling_factor 0.8, no timestep encoding, no chunking.
"""

from harl.nets.sable.decay import decay_matrix, head_decays
from harl.nets.sable.positional import timestep_encoding
from harl.nets.sable.retention import MultiScaleRetention, network_hidden_shape

__all__ = ["MultiScaleRetention", "decay_matrix", "head_decays", "network_hidden_shape", "timestep_encoding"]
