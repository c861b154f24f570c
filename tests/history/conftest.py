"""The history tests' fixtures."""

from __future__ import annotations

from pathlib import Path

import pytest

from eval.history.store import open_store


@pytest.fixture
def store(tmp_path: Path):
    opened = open_store(str(tmp_path / "history.sqlite"))
    yield opened
    opened.close()
