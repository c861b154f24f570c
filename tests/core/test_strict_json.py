"""Every JSON the project writes is strict: a NaN or an infinity becomes null, never the bare
``NaN``/``Infinity`` that strict parsers reject."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

from core.io import dumps, write_json


def _strict_load(text: str):
    def refuse(name: str):
        raise ValueError(f"non-strict JSON constant {name}")

    return json.loads(text, parse_constant=refuse)


def test_write_json_and_dumps_write_strict_json(tmp_path: Path):
    record = {
        "worth": math.inf,
        "tau": math.nan,
        "rows": [1.0, -math.inf, {"p": np.float64("nan"), "n": np.int64(3)}],
        "fine": 0.5,
    }
    write_json(tmp_path / "metrics.json", record)
    loaded = _strict_load((tmp_path / "metrics.json").read_text())
    assert loaded == {
        "worth": None,
        "tau": None,
        "rows": [1.0, None, {"p": None, "n": 3}],
        "fine": 0.5,
    }
    assert _strict_load(dumps({"worth": math.inf, "ok": 1.0})) == {"worth": None, "ok": 1.0}
