"""Action heads against torch.distributions, masks, and the shared-parameter guard."""

from __future__ import annotations

import torch

from harl.nets.heads import CategoricalHead, GaussianHead


def test_gaussian_log_prob_and_entropy_match_torch() -> None:
    """Per-dimension log-probs and summed entropy equal torch.distributions.Normal's."""
    torch.manual_seed(0)
    head = GaussianHead(4, 3)
    x = torch.randn(6, 4)
    actions, lp = head.sample(x, None, deterministic=False)
    ref = torch.distributions.Normal(head.mean(x), head._std())
    torch.testing.assert_close(lp, ref.log_prob(actions))
    lp2, ent = head.evaluate(x, actions, None)
    torch.testing.assert_close(lp2, lp)
    torch.testing.assert_close(ent, ref.entropy().sum(-1))
    assert float(head._std().detach().max()) < 0.5  # bounded by std_y_coef


def test_categorical_masks_forbid_actions() -> None:
    """Masked actions are never sampled nor chosen greedily, and have ~zero probability."""
    torch.manual_seed(0)
    head = CategoricalHead(4, [4])
    x = torch.randn(500, 4)
    avail = torch.tensor([1.0, 0.0, 1.0, 0.0]).expand(500, 4)
    a, lp = head.sample(x, avail, deterministic=False)
    assert set(a.squeeze(-1).tolist()) <= {0.0, 2.0}
    greedy, _ = head.sample(x, avail, deterministic=True)
    assert set(greedy.squeeze(-1).tolist()) <= {0.0, 2.0}
    lp_forbidden, _ = head.evaluate(x, torch.ones(500, 1), avail)
    assert float(lp_forbidden.detach().max()) < -1e8


def test_multidiscrete_log_probs_per_sub_action() -> None:
    """MultiDiscrete([2, 3]) gives one log-prob column per sub-action, equal to torch's Categorical."""
    torch.manual_seed(1)
    head = CategoricalHead(4, [2, 3])
    x = torch.randn(5, 4)
    a, lp = head.sample(x, None, deterministic=False)
    assert a.shape == lp.shape == (5, 2)
    logits = head.logits(x)
    ref0 = torch.distributions.Categorical(logits=logits[:, :2]).log_prob(a[:, 0].long())
    ref1 = torch.distributions.Categorical(logits=logits[:, 2:]).log_prob(a[:, 1].long())
    torch.testing.assert_close(lp, torch.stack([ref0, ref1], -1))


def test_sampling_frequencies_follow_the_probabilities() -> None:
    """Gumbel-max sampling reproduces softmax probabilities (10k samples, 2 % tolerance)."""
    torch.manual_seed(2)
    head = CategoricalHead(1, [3])
    with torch.no_grad():
        head.logits.weight.zero_()
        head.logits.bias.copy_(torch.log(torch.tensor([0.2, 0.3, 0.5])))
    a, _ = head.sample(torch.zeros(10_000, 1), None, deterministic=False)
    freq = torch.bincount(a.squeeze(-1).long(), minlength=3).float() / 10_000
    torch.testing.assert_close(freq, torch.tensor([0.2, 0.3, 0.5]), atol=0.02, rtol=0)
