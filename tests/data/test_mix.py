"""data.mix: the QA training mix."""

from __future__ import annotations

from pathlib import Path

import pytest


def test_the_training_mix_is_not_written_inside_the_collections_it_reads(tmp_path: Path):
    from data.mix import MixConfig, build_mix

    shared = tmp_path / "shared"
    shared.mkdir()
    with pytest.raises(ValueError, match="is inside --shared"):
        build_mix(MixConfig(shared=str(shared), out=str(shared / "mix")))
