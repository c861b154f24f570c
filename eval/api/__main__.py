"""Serve the REST API with uvicorn: ``relevance-grader serve --model runs/main/export --port 8000``.

Every :class:`ApiSettings` field is a flag (its default from the ``GRADER_*`` environment);
``uvicorn eval.api:app`` serves the same application from the environment alone. The grader is
loaded before the server starts: one that cannot be read is one line and exit 2.
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
    from measure.labelers import GraderLabeler

    # Loaded before the server starts, as eval.search loads it: a damaged or too new grader is
    # one line and exit 2 here, where in the server's start-up it was a traceback.
    labeler = GraderLabeler(settings.model)
    labeler.grader  # noqa: B018 - the property loads the model
    import uvicorn

    app = create_app(labeler=labeler, settings=settings)
    uvicorn.run(app, host=serve.host, port=serve.port)


if __name__ == "__main__":
    run_main(main)
