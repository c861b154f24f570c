"""Push an exported grader to the Hugging Face Hub.

    relevance-grader push --export runs/export/grader --repo_id ORG/NAME [--private true] [--revision v1]

The token comes from ``$HF_TOKEN`` or ``hf auth login``. Creating the repository is idempotent
(``exist_ok``) and re-pushing the same folder makes no change beyond a new commit of identical
files. Only exports that passed their round-trip check (``export_check.json``) are pushed.
"""

from __future__ import annotations

import re
import shutil
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypedDict

from core.cli import parse_config, run_main
from core.errors import InputError
from models.grader_config import ExportCheck

REQUIRED_FILES = (
    "config.json",
    "grader_config.json",
    "README.md",
    "model.safetensors",
    "export_check.json",
)


@dataclass
class PushConfig:
    export: str = field(
        default="runs/export/grader", metadata={"help": "Folder from `relevance-grader export`."}
    )
    repo_id: str = field(default="", metadata={"help": "ORG/NAME on the hub."})
    private: bool = field(default=False)
    revision: str | None = field(
        default=None, metadata={"help": "Branch to push to (created if missing)."}
    )
    commit_message: str = field(default="Upload relevance grader")


def _is_network_error(exc: BaseException) -> bool:
    """A failure to reach the hub or a refusal by it (httpx's errors, the hub's HTTP errors)."""
    return isinstance(exc, OSError) or any(
        cls.__name__ in {"HTTPError", "RequestError", "TransportError"} for cls in type(exc).__mro__
    )


def _with_card_for(folder: Path, repo_id: str) -> Path:
    """A temporary view of the export (links to its files) whose model card names the model by
    its hub id: the export's own card was written before the repo was known."""
    from models.builder import read_grader_config
    from models.card import model_card

    description = read_grader_config(folder)
    if description is None:
        raise InputError(f"{folder}: no grader_config.json (not a grader export)")
    staging = Path(tempfile.mkdtemp(prefix=".push-", dir=folder.parent))
    for path in folder.iterdir():
        if path.name != "README.md":
            (staging / path.name).symlink_to(path.resolve(), target_is_directory=path.is_dir())
    card = folder / "README.md"
    chosen = re.search(r"^license: (\S+)$", card.read_text(encoding="utf-8"), re.M)
    (staging / "README.md").write_text(
        model_card(description, repo_id, chosen.group(1) if chosen else None),
        encoding="utf-8",
    )
    return staging


def read_export_check(folder: Path) -> ExportCheck:
    """The round-trip record of an export; a damaged one is named, never a KeyError."""
    path = folder / ExportCheck.FILE
    try:
        return ExportCheck.read(path)
    except (InputError, UnicodeDecodeError) as exc:
        why = str(exc).removeprefix(f"{path}: ")
        raise InputError(
            f"{path}: not a round-trip record ({why}); re-run relevance-grader export"
        ) from None


class Pushed(TypedDict):
    """Where an export was pushed."""

    repo: str  # the repository's URL
    commit: str
    files: list[str]


def push(config: PushConfig, api: Any = None) -> Pushed:
    from huggingface_hub import HfApi, get_token

    folder = Path(config.export)
    if not config.repo_id or "/" not in config.repo_id:
        raise InputError(f"repo_id: expected ORG/NAME, got {config.repo_id!r}")
    missing = [name for name in REQUIRED_FILES if not (folder / name).exists()]
    if missing:
        raise FileNotFoundError(
            f"{folder}: missing {', '.join(missing)}; run `relevance-grader export` first"
        )
    check = read_export_check(folder)
    if not check.passed:
        raise InputError(f"{folder}: the export failed its round-trip check; not pushing")
    if api is None:
        token = get_token()
        if not token:
            raise InputError("no hub token: set $HF_TOKEN or run `hf auth login`")
        api = HfApi(token=token)
    staging = _with_card_for(folder, config.repo_id)
    try:
        url = api.create_repo(
            repo_id=config.repo_id, repo_type="model", private=config.private, exist_ok=True
        )
        if config.revision:
            api.create_branch(
                repo_id=config.repo_id, branch=config.revision, repo_type="model", exist_ok=True
            )
        commit = api.upload_folder(
            repo_id=config.repo_id,
            folder_path=str(staging),
            repo_type="model",
            revision=config.revision,
            commit_message=config.commit_message,
        )
    except Exception as exc:  # the hub client's network errors are not OSErrors: name them once
        if not _is_network_error(exc):
            raise
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise ConnectionError(f"hub: pushing to {config.repo_id} failed: {reason}") from None
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return {
        "repo": str(url),
        "commit": str(getattr(commit, "oid", commit)),
        "files": sorted(p.name for p in folder.iterdir()),
    }


def main(args: Sequence[str] | None = None) -> None:
    (config,) = parse_config([PushConfig], args)
    result = push(config)
    print(f"pushed {len(result['files'])} files to {result['repo']} ({result['commit']})")


if __name__ == "__main__":
    run_main(main)
