"""Training stage: fine-tune the grader (full, frozen backbone, LoRA; cross-entropy, contrastive)."""
