"""data.mix: the QA training mix."""

from __future__ import annotations

import json
from pathlib import Path

import pytest


def test_the_training_mix_is_not_written_inside_the_collections_it_reads(tmp_path: Path):
    from data.mix import MixConfig, build_mix

    shared = tmp_path / "shared"
    shared.mkdir()
    with pytest.raises(ValueError, match="is inside --shared"):
        build_mix(MixConfig(shared=str(shared), out=str(shared / "mix")))


def _write_collection(folder: Path, corpus: list[dict], queries: list[dict], qrels: dict) -> None:
    """A BEIR-layout folder; ``qrels`` maps a file name to its (qid, doc_id, grade) rows."""
    folder.mkdir(parents=True)
    for name, rows in (("corpus.jsonl", corpus), ("queries.jsonl", queries)):
        (folder / name).write_text("".join(json.dumps(row) + "\n" for row in rows))
    for name, rows in qrels.items():
        lines = ["query-id\tcorpus-id\tscore"] + [f"{q}\t{d}\t{g}" for q, d, g in rows]
        (folder / name).write_text("\n".join(lines) + "\n")


@pytest.fixture
def shared(tmp_path: Path) -> Path:
    """Tiny SQuAD, WikiQA and SciFact folders in the staged layout."""
    root = tmp_path / "shared"
    paragraphs = {
        "a0-p0": ("Rivers", "The Nile is the longest river in Africa."),
        "a0-p1": ("Rivers", "The Amazon carries the most water of any river."),
        "a0-p2": ("Rivers", "Rivers flow into seas; the Nile delta is fertile."),
        "a0-p3": ("Rivers", "Deltas form where rivers meet the sea."),
        "a0-p4": ("Rivers", "Floods renew the soil of river valleys."),
        "a1-p0": ("Moons", "The Moon orbits the Earth every 27 days."),
    }
    _write_collection(
        root / "squad-dev",
        [{"_id": d, "title": t, "text": x} for d, (t, x) in paragraphs.items()],
        [
            {
                "_id": "s1",
                "text": "Which is Africa's longest river?",
                "answers": ["Nile"],
                "metadata": {"gold_doc": "a0-p0"},
            },
            {
                "_id": "s2",
                "text": "Which river carries most water?",
                "answers": ["Amazon"],
                "metadata": {"gold_doc": "a0-p1"},
            },
            {
                "_id": "s3",
                "text": "How long is the Moon's orbit?",
                "answers": ["27 days"],
                "metadata": {"gold_doc": "a1-p0"},
            },
        ],
        {"qrels.tsv": [("s1", "a0-p0", 1), ("s2", "a0-p1", 1), ("s3", "a1-p0", 1)]},
    )
    _write_collection(
        root / "wikiqa",
        [{"_id": f"w{i}", "title": "Tea", "text": f"Tea sentence {i}."} for i in range(4)],
        [{"_id": "Q1", "text": "what is tea"}, {"_id": "Q2", "text": "who grows tea"}],
        {"qrels.tsv": [("Q1", "w0", 1), ("Q1", "w1", 0), ("Q2", "w2", 0), ("Q2", "w3", 0)]},
    )
    abstracts = {
        "c1": ("Vitamin D", "Vitamin D supplements lower fracture risk in elderly women."),
        "c2": ("Fractures", "Vitamin D and calcium in elderly fracture prevention trials."),
        "n1": ("Vitamin D", "Vitamin D levels in elderly women with fractures."),
        "n2": ("Vitamin D", "Vitamin D deficiency in elderly patients."),
        "n3": ("Fractures", "Fracture risk in women."),
        "n4": ("Vitamin", "Vitamin intake."),
        "z1": ("Malaria", "Mosquito nets reduce malaria transmission in children."),
        "z2": ("Malaria", "Bed nets and malaria in African villages."),
        "z3": ("Malaria", "Malaria in children."),
        "z4": ("Mosquitoes", "Mosquito bites."),
    }
    _write_collection(
        root / "scifact",
        [{"_id": d, "title": t, "text": x} for d, (t, x) in abstracts.items()],
        [
            {"_id": "10", "text": "Vitamin D lowers fracture risk in elderly women."},
            {"_id": "11", "text": "Mosquito nets reduce malaria in children."},
            {"_id": "12", "text": "Vitamin D deficiency causes fractures."},
        ],
        {
            "qrels_train.tsv": [("10", "c1", 1), ("10", "c2", 1), ("11", "z1", 1)],
            "qrels.tsv": [("12", "n2", 1)],  # a test claim: never in a training mix
        },
    )
    return root


def _mix(shared: Path, out: Path, **options) -> list[dict]:
    from data.mix import MixConfig, build_mix

    build_mix(MixConfig(shared=str(shared), out=str(out), **options))
    return [json.loads(line) for line in (out / "judgments.jsonl").read_text().splitlines()]


def test_the_paper_scale_mix_takes_every_question_with_its_negatives(shared: Path, tmp_path: Path):
    rows = _mix(
        shared,
        tmp_path / "mix",
        squad_questions=-1,
        squad_negatives=3,
        wikiqa_pairs=-1,
        scifact_claims=-1,
        scifact_negatives=3,
    )
    by_query: dict[str, dict[str, int]] = {}
    for row in rows:
        by_query.setdefault(row["qid"], {})[row["doc_id"]] = row["grade"]
        assert row["label"] == (row["grade"] >= 2)
    # Every SQuAD question: its gold paragraph, and up to 3 of its article's without the answer.
    assert by_query["squad:s1"] == {
        "squad:a0-p0": 3,
        "squad:a0-p1": 0,
        "squad:a0-p3": 0,
        "squad:a0-p4": 0,
    }  # a0-p2 holds "Nile"
    assert by_query["squad:s3"] == {"squad:a1-p0": 3}  # its article has no other paragraph
    assert set(by_query["squad:s2"]) >= {"squad:a0-p1"} and len(by_query["squad:s2"]) == 4
    # Every WikiQA question with a correct sentence, all of its candidates.
    assert by_query["wikiqa:Q1"] == {"wikiqa:w0": 3, "wikiqa:w1": 0}
    assert "wikiqa:Q2" not in by_query
    # SciFact train claims: cited abstracts, then the best uncited BM25 hits; never a test claim.
    assert by_query["scifact:10"] == {
        "scifact:c1": 3,
        "scifact:c2": 3,
        "scifact:n1": 0,
        "scifact:n2": 0,
        "scifact:n3": 0,
    }
    assert by_query["scifact:11"] == {
        "scifact:z1": 3,
        "scifact:z2": 0,
        "scifact:z3": 0,
        "scifact:z4": 0,
    }
    assert "scifact:12" not in by_query
    negative = next(r for r in rows if r["doc_id"] == "scifact:n1")
    assert negative["judge"]["model"] == "scifact BM25 negatives"
    assert negative["title"] == "Vitamin D"
    manifest = json.loads((tmp_path / "mix" / "manifest.json").read_text())
    assert manifest["counts"]["scifact"] == {"queries": 2, "pairs": 5 + 4, "relevant": 3}
    assert manifest["config"]["scifact_claims"] == -1


def test_a_zero_count_leaves_a_source_out_and_a_count_samples_questions(
    shared: Path, tmp_path: Path
):
    rows = _mix(shared, tmp_path / "mix", squad_questions=2, wikiqa_pairs=0, scifact_claims=1)
    sources = {row["qid"].split(":")[0] for row in rows}
    assert sources == {"squad", "scifact"}
    assert len({r["qid"] for r in rows if r["qid"].startswith("squad:")}) == 2
    assert len({r["qid"] for r in rows if r["qid"].startswith("scifact:")}) == 1
    # Negatives default to 3 for SciFact, 2 for SQuAD (the committed small mixes' recipe).
    claim = next(r["qid"] for r in rows if r["qid"].startswith("scifact:"))
    assert sum(r["grade"] == 0 for r in rows if r["qid"] == claim) == 3


@pytest.mark.parametrize(
    ("option", "value"),
    [("squad_questions", -2), ("scifact_claims", -5), ("scifact_negatives", -1)],
)
def test_a_count_below_minus_one_is_refused_naming_the_option(option: str, value: int):
    from data.mix import MixConfig

    with pytest.raises(ValueError, match=f"^{option}: expected >= 0"):
        MixConfig(**{option: value})


def test_the_48k_config_asks_for_every_question_of_every_source():
    from core.cli import parse_config
    from data.mix import MixConfig

    (config,) = parse_config([MixConfig], ["--config", "data/configs/qa-mix-48k.yaml"])
    assert (config.squad_questions, config.wikiqa_pairs, config.scifact_claims) == (-1, -1, -1)
    assert (config.squad_negatives, config.scifact_negatives) == (3, 3)
    assert config.out.startswith("runs/")  # built, never committed


def test_every_mix_config_loads_and_builds_under_runs():
    from core.cli import parse_config
    from data.mix import MixConfig

    for path in sorted(Path("data/configs").glob("qa-mix-*.yaml")):
        (config,) = parse_config([MixConfig], ["--config", str(path)])
        assert config.out.startswith("runs/"), path  # built, never committed
        assert config.squad_negatives == config.scifact_negatives == 3
