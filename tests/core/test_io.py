"""core.io: overlap checks between outputs and inputs, folder replacement, file modes, BOMs."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from core.errors import InputError
from core.io import refuse_overlap, replace_folder


def test_an_output_may_not_hold_an_input_nor_lie_inside_an_input_folder(tmp_path: Path):
    export = tmp_path / "holder" / "export"
    export.mkdir(parents=True)
    judgments = tmp_path / "judgments.jsonl"
    judgments.write_text("{}\n")
    inputs = [("export", export), ("judgments", judgments)]
    # The output replaced as a whole holds the input: replacing it would delete the input.
    for out in (export, tmp_path / "holder", tmp_path):
        with pytest.raises(ValueError, match=r"would replace --(export|judgments)"):
            refuse_overlap("out", out, inputs)
    # The output inside an input folder: writing it would change that input.
    with pytest.raises(ValueError, match=r"out: .* is inside --export"):
        refuse_overlap("out", export / "copy", inputs)
    refuse_overlap("out", tmp_path / "elsewhere", inputs)  # apart: fine


def test_an_output_folder_written_into_counts_only_the_files_it_writes(tmp_path: Path):
    run = tmp_path / "search" / "run.trec"
    run.parent.mkdir()
    run.write_text("1 Q0 d 1 1.0 r\n")
    writes = ("metrics.json", "per_query.json")
    refuse_overlap("out", run.parent, [("run", run)], writes=writes)  # beside the outputs
    with pytest.raises(ValueError, match="would replace --human"):
        refuse_overlap("out", run.parent, [("human", run.parent / "metrics.json")], writes=writes)
    with pytest.raises(ValueError, match="is inside --corpus"):
        refuse_overlap("out", tmp_path / "search", [("corpus", tmp_path)], writes=writes)


def ordinary_mode(directory: bool = False) -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return (0o777 if directory else 0o666) & ~mask


def test_a_replaced_folder_has_the_ordinary_modes_even_for_privately_written_weights(
    tmp_path: Path,
):
    import torch
    from safetensors.torch import save_file

    out = tmp_path / "export"
    with replace_folder(out) as staging:
        save_file({"w": torch.zeros(2)}, str(staging / "model.safetensors"))  # written 0600
        (staging / "config.json").write_text("{}")
        (staging / "sub").mkdir()
        save_file({"w": torch.zeros(2)}, str(staging / "sub" / "model.safetensors"))
    assert stat.S_IMODE(out.stat().st_mode) == ordinary_mode(directory=True)
    for name in ("model.safetensors", "config.json", "sub/model.safetensors"):
        assert stat.S_IMODE((out / name).stat().st_mode) == ordinary_mode(), name


def test_a_folder_that_cannot_be_replaced_names_where_the_finished_result_is(
    tmp_path: Path, monkeypatch
):
    """A rename refused (a mount point, a busy folder) left a complete result in a hidden
    .NAME.new-* folder that the error did not mention; the old folder stays as it was."""
    import core.io as io_module

    out = tmp_path / "dataset"
    out.mkdir()
    (out / "old.txt").write_text("previous")
    real_replace = os.replace

    def refuse_the_new_folder(src, dst):
        if Path(dst) == out and ".new-" in str(src):
            raise PermissionError(13, "Permission denied")
        return real_replace(src, dst)

    monkeypatch.setattr(io_module.os, "replace", refuse_the_new_folder)
    expected = r"could not take .*complete in .*\.dataset\.new-"
    with pytest.raises(InputError, match=expected) as info, replace_folder(out) as staging:
        (staging / "train.jsonl").write_text("{}\n")
    staged = Path(str(info.value).split("complete in ")[1].split(":")[0])
    assert (staged / "train.jsonl").exists()
    assert (out / "old.txt").read_text() == "previous"  # the old folder is back in its place


def test_an_output_file_that_is_a_link_writes_its_target_and_stays_a_link(tmp_path: Path):
    from data.beir import read_trec_run, write_trec_run

    (tmp_path / "store").mkdir()
    target = tmp_path / "store" / "reranked.trec"
    write_trec_run(target, {"q": {"old": 1.0}})
    link = tmp_path / "reranked.trec"
    link.symlink_to(target)
    write_trec_run(link, {"q": {"new": 1.0}})  # as eval.rerank --out writes it
    assert link.is_symlink() and link.resolve() == target
    assert read_trec_run(target) == {"q": {"new": 1.0}}
    assert [p.name for p in (tmp_path / "store").iterdir()] == ["reranked.trec"]


def test_the_keyed_cache_resumes_after_a_kill_and_keeps_the_latest_line(tmp_path: Path):
    from core.io import KeyedCache

    path = tmp_path / "c.jsonl"
    with KeyedCache(path) as cache:
        cache.put("a", {"value": 1})
        cache.put("b", {"value": 2})
        cache.put("a", {"value": 3})  # a re-judged result replaces the earlier one
    with open(path, "a", encoding="utf-8") as handle:
        handle.write('{"key": "c", "val')  # killed mid-write
    cache = KeyedCache(path, lambda line: line["value"])
    assert dict(cache.values) == {"a": 3, "b": 2}
    assert cache.missing(["a", "c", "d", "c"]) == ["c", "d"]
    assert cache.put("c", {"value": 4}) == 4
    cache.close()
    assert KeyedCache(path, lambda line: line["value"]).values == {"a": 3, "b": 2, "c": 4}
    lines = path.read_text(encoding="utf-8").splitlines()
    assert json.loads(lines[-1]) == {"value": 4, "key": "c"}  # the partial line was cut off
    assert len(lines) == 4


def test_the_keyed_cache_names_a_damaged_line(tmp_path: Path):
    from core.io import KeyedCache, RecordError

    path = tmp_path / "c.jsonl"
    path.write_text('{"key": "a", "value": 1}\nnot json\n{"key": "b", "value": 2}\n')
    with pytest.raises(RecordError, match=r"c\.jsonl:2"):
        KeyedCache(path)


def test_a_file_digest_is_read_once_and_follows_every_change(tmp_path: Path, monkeypatch):
    """sha256_file reads a file once per process while it is unchanged (the main job digests its
    export for every stage), and any new content gives the new digest, even at the same size."""
    import builtins
    import hashlib

    from core.io import sha256_file, sha256_path

    weights = tmp_path / "export" / "model.safetensors"
    weights.parent.mkdir()
    weights.write_bytes(b"a" * 1000)
    opened: list[str] = []
    real_open = builtins.open

    def counting_open(file, *args, **kwargs):
        opened.append(str(file))
        return real_open(file, *args, **kwargs)

    monkeypatch.setattr(builtins, "open", counting_open)
    first = sha256_file(weights)
    assert first == hashlib.sha256(b"a" * 1000).hexdigest()
    # The folder's digest is its files' names and digests, and reuses the file's cached digest.
    folder = hashlib.sha256(b"model.safetensors\0" + first.encode()).hexdigest()
    assert sha256_path(weights.parent) == folder
    assert opened == [os.path.abspath(weights)]  # read once
    weights.write_bytes(b"b" * 1000)  # same size, same inode, new content
    assert sha256_file(weights) == hashlib.sha256(b"b" * 1000).hexdigest()
    (tmp_path / "new").write_bytes(b"c" * 1000)
    os.replace(tmp_path / "new", weights)  # a new file under the old name
    assert sha256_file(weights) == hashlib.sha256(b"c" * 1000).hexdigest()


def test_a_complete_last_record_without_its_newline_is_kept_and_only_a_cut_one_dropped(
    tmp_path: Path, caplog
):
    """A hand edit or a merge leaves the last record without its newline: the appender once cut
    it (a paid label, a judgment) on open. Now it gets its newline; a line cut short by a kill is
    dropped with a warning naming the file and line."""
    from core.io import JsonlAppender, KeyedCache

    path = tmp_path / "c.jsonl"
    path.write_text('{"key": "a", "value": 1}\n{"key": "b", "value": 2}')  # no final newline
    with KeyedCache(path, lambda line: line["value"]) as cache:
        assert cache.values == {"a": 1, "b": 2}
        cache.put("c", {"value": 3})
    assert KeyedCache(path, lambda line: line["value"]).values == {"a": 1, "b": 2, "c": 3}
    assert not caplog.text
    with open(path, "a", encoding="utf-8") as handle:
        handle.write('{"key": "d", "val')  # a kill mid-write
    with JsonlAppender(path) as appender:
        appender.write({"key": "d", "value": 4})
    assert f"{path}:4: the last line is not a complete JSON record" in caplog.text
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert [line["key"] for line in lines] == ["a", "b", "c", "d"]


def test_two_processes_cannot_write_one_cache(tmp_path: Path):
    """A second writer of one cache (two data.label runs) is refused in one line naming the
    cache; one process opening it twice is not, and the lock goes with the close."""
    import subprocess
    import sys

    from core.io import CacheLocked, KeyedCache

    path = tmp_path / "labels.cache.jsonl"
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; from core.io import KeyedCache; "
            f"c = KeyedCache({str(path)!r}, exclusive=True); print('held', flush=True); "
            "sys.stdin.read()",
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=Path(__file__).resolve().parents[2],
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(CacheLocked, match=r"labels\.cache\.jsonl: another process is writing"):
            KeyedCache(path, exclusive=True)
        cache = KeyedCache(path)  # reading is allowed; the first write takes the lock
        with pytest.raises(CacheLocked):
            cache.put("a", {"value": 1})
        assert not path.exists() or path.read_text() == ""
    finally:
        holder.communicate("")
    with KeyedCache(path, exclusive=True) as first, KeyedCache(path) as second:
        first.put("a", {"value": 1})
        second.put("b", {"value": 2})  # the same process: the lock is shared
    assert KeyedCache(path).values.keys() == {"a", "b"}


def test_a_second_data_label_on_one_cache_is_refused_before_it_pays(tmp_path: Path, capsys):
    from core.io import hold_exclusive
    from data.label import main

    pairs = tmp_path / "pairs.jsonl"
    pairs.write_text(json.dumps({"qid": "1", "query": "q", "doc_id": "17", "text": "t"}) + "\n")
    qrels = tmp_path / "qrels.tsv"
    qrels.write_text("query-id\tcorpus-id\tscore\n1\t17\t1\n")
    cache = tmp_path / "j.cache.jsonl"
    # Another process holds the lock: simulated by an flock from a second descriptor.
    import fcntl

    fd = os.open(tmp_path / "j.cache.jsonl.lock", os.O_RDWR | os.O_CREAT)
    fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        from core.cli import run_main

        args = ["--pairs", str(pairs), "--out", str(tmp_path / "j.jsonl"), "--backend", "qrels"]
        with pytest.raises(SystemExit) as exit_:
            run_main(main, [*args, "--qrels", str(qrels), "--grade_map", '{"1": 3}'])
    finally:
        os.close(fd)
    err = capsys.readouterr().err.strip().splitlines()
    assert exit_.value.code == 2 and err[-1].startswith("error: ") and str(cache) in err[-1]
    assert not (tmp_path / "j.jsonl").exists() and not cache.exists()
    release = hold_exclusive(cache)  # free again once the other holder is gone
    release()
