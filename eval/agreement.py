"""Former name of :mod:`eval.ranking_agreement` (Kendall's τ between system rankings), kept so
that ``python -m eval.agreement`` goes on working."""

from core.cli import run_main
from measure.metrics.ranking_agreement import SystemAgreementConfig, agreement, main

__all__ = ["SystemAgreementConfig", "agreement", "main"]

if __name__ == "__main__":
    run_main(main)
