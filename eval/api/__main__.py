"""Serve the REST API with uvicorn: ``python -m eval.api --model runs/main/export --port 8000``.

Every :class:`ApiSettings` field is a flag (its default from the ``GRADER_*`` environment);
``uvicorn eval.api:app`` serves the same application from the environment alone.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from core.cli import parse_config, run_main
from core.errors import InputError
from eval.api.server import create_app
from eval.api.settings import ApiSettings


@dataclass
class ServeConfig:
    host: str = field(default="127.0.0.1", metadata={"help": "Address to listen on."})
    port: int = field(default=8000, metadata={"help": "Port to listen on."})


def main(args: Sequence[str] | None = None) -> None:
    settings, serve = parse_config([ApiSettings, ServeConfig], args)
    if not settings.model:
        raise InputError("model: give --model (an exported grader) or set GRADER_MODEL")
    import uvicorn

    uvicorn.run(create_app(settings=settings), host=serve.host, port=serve.port)


if __name__ == "__main__":
    run_main(main)
