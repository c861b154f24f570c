"""Losses for the 2-label grader, one class each, chosen by name (``LOSSES``).

Every loss takes ``logits`` (batch, 2), hard ``labels`` (batch,) and optional ``soft_targets``
(batch,): the teacher's P(relevant) where soft targets are used.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from core.errors import InputError


class CrossEntropyLoss(nn.Module):
    """Cross-entropy with optional class weights, label smoothing and soft targets.

    With ``soft_targets`` given (teacher confidence or grade mapped to P(relevant)), the target
    distribution is (1 - p, p) instead of the one-hot label.
    """

    def __init__(
        self,
        class_weights: list[float] | None = None,
        label_smoothing: float = 0.0,
        use_soft_targets: bool = False,
    ) -> None:
        super().__init__()
        weight = torch.tensor(class_weights, dtype=torch.float32) if class_weights else None
        self.register_buffer("weight", weight, persistent=False)
        self.label_smoothing = label_smoothing
        self.use_soft_targets = use_soft_targets

    def forward(
        self, logits: torch.Tensor, labels: torch.Tensor, soft_targets: torch.Tensor | None = None
    ) -> torch.Tensor:
        logits = logits.float()
        # The Trainer moves the model, not the loss: the class weights follow the logits.
        weight = None if self.weight is None else self.weight.to(logits.device)
        if self.use_soft_targets and soft_targets is not None:
            target = torch.stack([1 - soft_targets, soft_targets], dim=-1).to(logits.dtype)
            return F.cross_entropy(
                logits, target, weight=weight, label_smoothing=self.label_smoothing
            )
        return F.cross_entropy(logits, labels, weight=weight, label_smoothing=self.label_smoothing)


class ContrastiveLoss(nn.Module):
    """The paper's contrastive loss (Jeong 2025, App. A), applied to output and label vectors.

    L = (1 - Y) * 1/2 * D^2 + Y * 1/2 * max(0, m - D)^2, with D the Euclidean distance between
    the model's output vector and a label vector, and m the margin.

    How the vectors are formed (the paper leaves it open; this is our reading): the output vector
    is the softmax of the two logits, a point on the probability simplex; label vectors are the
    one-hot vectors e_0 (not relevant) and e_1 (relevant). Each example contributes one similar
    pair (Y = 0) with its own label's vector, pulled together, and one dissimilar pair (Y = 1) with
    the other label's vector, pushed beyond the margin. The loss is the batch mean of the sum.
    """

    def __init__(self, margin: float = 1.0) -> None:
        super().__init__()
        self.margin = margin

    def forward(
        self, logits: torch.Tensor, labels: torch.Tensor, soft_targets: torch.Tensor | None = None
    ) -> torch.Tensor:
        output = torch.softmax(logits.float(), dim=-1)
        own = F.one_hot(labels, num_classes=output.shape[-1]).to(output.dtype)
        other = 1 - own  # for two classes, the other label's one-hot vector
        d_own = torch.linalg.vector_norm(output - own, dim=-1)
        d_other = torch.linalg.vector_norm(output - other, dim=-1)
        similar = 0.5 * d_own.pow(2)
        dissimilar = 0.5 * torch.clamp(self.margin - d_other, min=0).pow(2)
        return (similar + dissimilar).mean()


LOSSES: dict[str, type[nn.Module]] = {
    "cross_entropy": CrossEntropyLoss,
    "contrastive": ContrastiveLoss,
}


def build_loss(
    name: str,
    *,
    class_weights: list[float] | None = None,
    label_smoothing: float = 0.0,
    soft_targets: bool = False,
    margin: float = 1.0,
) -> nn.Module:
    if name == "cross_entropy":
        return CrossEntropyLoss(class_weights, label_smoothing, soft_targets)
    if name == "contrastive":
        return ContrastiveLoss(margin)
    raise InputError(f"loss: expected one of {sorted(LOSSES)}, got {name!r}")
