"""Sable (Mahjoub et al., ICML 2025, arXiv 2410.01706) in PyTorch: retention and the network.

Done here, mirroring Mava's JAX implementation (instadeepai/Mava, branch feat/sable, 73c4611):

* ``decay``: per-head kappas and the multi-agent decay matrix, xi and chunk carry with resets
  at episode starts (mava/networks/retention.py:103-191, 209-213);
* ``positional``: the optional timestep sinusoid (mava/utils/sable_utils.py:96-140);
* ``retention``: gated multi-scale retention, parallel / chunkwise / recurrent, and the carried
  state's shape (mava/networks/retention.py:26-304, mava/utils/sable_utils.py:72-93).
* ``network``: the encoder-decoder SableNetwork (mava/networks/sable_network.py:32-510): obs
  embedding RMSNorm -> Dense(no bias, orthogonal sqrt 2) -> GELU (95-101); encoder blocks of
  retention + RMSNorm, SwiGLU + RMSNorm, a shared RMSNorm before each (32-77, 134-139); value head
  Dense -> GELU -> RMSNorm -> Dense(1, orthogonal 0.01) (102-109); the decoder over shifted actions
  (start token e_0 of width A + 1 for each timestep's first agent: discrete_trainer_executor.py:
  182-204), action embedding Dense -> GELU -> RMSNorm (no bias when discrete, 276-290, 326-327),
  blocks of causal self-retention, causal cross-retention (query: the encoder's output) and
  SwiGLU, each with an RMSNorm (169-257); action head as the value head's (292-299); illegal
  logits at finfo.min (discrete_trainer_executor.py:105-120); SwiGLU's weights zero at start
  (mava/utils/sable_utils.py:27-53); flax's tanh-GELU and RMSNorm epsilon 1e-6. ``evaluate`` is the
  training call (parallel, or chunkwise over ``chunk_timesteps``: rec_retention.yaml's
  timestep_chunk_size, 32 when use_chunkwise), ``act`` the acting call.

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

Continuous actions: 73c4611 has only the decoder's pieces (a biased action embedding and a
zero-initialised state-independent log_std, sable_network.py:286-290; ff_sable.py:404 wires
only "discrete") and no continuous trainer/executor; here the decoder reads the previous agent's
raw action (zeros for the first agent) and the policy is a plain diagonal Gaussian
(mean, exp(log_std)), not checked against Mava's later continuous executor.

The feed-forward variant (ff_sable) is this network called on single timesteps from zero states
(``harl.policy.sable_policy``, ``memory = false``): one timestep's decay is all ones, as 73c4611's
ff retention (retention.py:69-72), and the decoder keeps its causal mask, which 73c4611's ff
variant drops and Mava's later code keeps. ff_retention.yaml's agents_chunk_size (off by default) is
``chunk_agents``: retention over chunks of agents, the state carried from chunk to chunk
(``MultiScaleRetention.agent_chunks``), the same function as one pass (Mava's chunked encoder lets an
agent read only its own and earlier chunks, a different function; harl's does not). The stages over it: ``harl.policy.sable_policy`` (acting, states as step-record
fields), ``harl.update.sable_values`` (critic), ``harl.update.objectives.sable`` (Mava's PPO);
docs/sable.md.

Mava's network defaults (configs/network/{ff,rec}_retention.yaml): n_block 1, embed_dim 64,
n_head 1, decay_scaling_factor 0.8, no timestep encoding, no chunking.
"""

from harl.nets.sable.decay import decay_matrix, head_decays
from harl.nets.sable.network import SableAction, SableEvaluation, SableHidden, SableNetwork
from harl.nets.sable.positional import timestep_encoding
from harl.nets.sable.retention import MultiScaleRetention, network_hidden_shape

__all__ = ["MultiScaleRetention", "SableAction", "SableEvaluation", "SableHidden", "SableNetwork", "decay_matrix",
           "head_decays", "network_hidden_shape", "timestep_encoding"]
