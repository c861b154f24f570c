"""Former name of :mod:`data.judge_agreement` (a judge against human labels), kept so that
``python -m data.agreement`` goes on working."""

from core.cli import run_main
from data.judge_agreement import AgreementConfig, agreement, main

__all__ = ["AgreementConfig", "agreement", "main"]

if __name__ == "__main__":
    run_main(main)
