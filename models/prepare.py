"""Prepare an embedded or local model once: convert it into the cache and check that it loads.

    relevance-grader prepare                      # SmolLM2-135M as a 2-label classifier
    relevance-grader prepare --model minilm-l6    # the retrieval embedder
    relevance-grader prepare --model meta-llama/Llama-3.2-1B-Instruct   # where the hub is reachable
    relevance-grader prepare --model smollm2-135m --print_path true   # its GGUF file, for llama.cpp

Prints where the weights live, the parameter count and the load time; with ``--print_path true``,
only the file an embedded model is installed as (nothing converted or loaded).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from core.cli import parse_config, run_main
from models.resolve import EMBEDDED_MODELS, embedded_file, load_model, resolve_model_path


@dataclass
class PrepareConfig:
    model: str = field(
        default="smollm2-135m",
        metadata={"help": f"Embedded name ({', '.join(EMBEDDED_MODELS)}), hub id or local path."},
    )
    task: str = field(
        default="classification", metadata={"help": "classification, causal-lm or base."}
    )
    print_path: bool = field(
        default=False,
        metadata={
            "help": "Print only where the embedded model lies as installed (smollm2-135m: its "
            "GGUF file, which llama.cpp's llama-server serves with -m) and stop."
        },
    )


def main(args: Sequence[str] | None = None) -> None:
    (config,) = parse_config([PrepareConfig], args)
    if config.print_path:
        print(embedded_file(config.model))
        return
    start = time.perf_counter()
    path = resolve_model_path(config.model)
    resolved = time.perf_counter() - start
    task = "base" if config.model == "minilm-l6" else config.task
    start = time.perf_counter()
    model, _ = load_model(config.model, task=task)  # type: ignore[arg-type]
    loaded = time.perf_counter() - start
    params = sum(p.numel() for p in model.parameters())
    print(f"{config.model}: {path}")
    print(f"  {type(model).__name__}, {params / 1e6:.1f} M parameters")
    print(f"  resolve {resolved:.1f} s, load {loaded:.1f} s")


if __name__ == "__main__":
    run_main(main)
