from __future__ import annotations

import math

import pytest
import torch

from models.losses import ContrastiveLoss, CrossEntropyLoss, build_loss


def test_contrastive_loss_matches_a_hand_computation():
    # logits (2, 0) for a relevant example: p = (e^2, 1) / (e^2 + 1)
    p1 = math.exp(2) / (math.exp(2) + 1)
    p0 = 1 - p1
    d_own = math.sqrt(p1**2 + p1**2)  # distance of (p1, p0) to e_1 = (0, 1)
    d_other = math.sqrt((p1 - 1) ** 2 + p0**2)  # distance to e_0 = (1, 0)
    expected_relevant = 0.5 * d_own**2 + 0.5 * max(0.0, 1.0 - d_other) ** 2
    # logits (0, 0) for a non-relevant example: p = (0.5, 0.5), both distances sqrt(0.5)
    expected_irrelevant = 0.5 * 0.5 + 0.5 * (1 - math.sqrt(0.5)) ** 2
    loss = ContrastiveLoss(margin=1.0)(torch.tensor([[2.0, 0.0], [0.0, 0.0]]), torch.tensor([1, 0]))
    assert loss.item() == pytest.approx((expected_relevant + expected_irrelevant) / 2, rel=1e-6)


def test_contrastive_loss_is_zero_for_confident_correct_outputs():
    loss = ContrastiveLoss(margin=1.0)(
        torch.tensor([[-30.0, 30.0], [30.0, -30.0]]), torch.tensor([1, 0])
    )
    assert loss.item() == pytest.approx(0.0, abs=1e-9)


def test_cross_entropy_with_soft_targets_and_weights():
    logits = torch.tensor([[0.3, -0.2], [1.0, 2.0]])
    labels = torch.tensor([0, 1])
    soft = torch.tensor([0.25, 0.9])
    loss = CrossEntropyLoss(use_soft_targets=True)(logits, labels, soft)
    log_p = torch.log_softmax(logits, -1)
    manual = (
        -((0.75 * log_p[0, 0] + 0.25 * log_p[0, 1]) + (0.1 * log_p[1, 0] + 0.9 * log_p[1, 1])) / 2
    )
    assert loss.item() == pytest.approx(manual.item(), rel=1e-6)
    # Without soft targets, weights follow PyTorch's weighted mean.
    weighted = CrossEntropyLoss(class_weights=[1.0, 3.0])(logits, labels)
    manual = -(1.0 * log_p[0, 0] + 3.0 * log_p[1, 1]) / 4.0
    assert weighted.item() == pytest.approx(manual.item(), rel=1e-6)


def test_unknown_loss_name():
    with pytest.raises(ValueError, match="loss: expected one of"):
        build_loss("hinge")
