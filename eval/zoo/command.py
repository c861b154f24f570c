"""``relevance-grader zoo``: build a zoo of retrieval systems on a collection with qrels, and rank
labelers by how well the system ranking under their labels matches the human one.

    relevance-grader zoo --zoo eval/configs/zoo/standard.yaml \\
        --collection data/collections/trec-dl-2019-passage \\
        --labelers grader=grader:runs/main/export cosine=cosine:minilm-l6 \\
            bm25=bm25:data/collections/trec-dl-2019-passage constant=constant: random=random:0 \\
        --calibrations cosine=runs/main/cv/fold-0/cosine/metrics.json \\
        --out runs/zoo

The zoo file defines the systems (measure.zoo.definition); a rerank's ``by`` names a labeler
or a ``--scorers`` entry. Systems are kept in ``OUT/systems/`` and labels in the label cache, so a
re-run builds and labels only what changed, and a pair several systems or labelers need is
scored once. Writes ``OUT/leaderboard.json`` and ``OUT/leaderboard.md``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from core.cli import bounded, parse_config, run_main
from core.errors import InputError
from core.io import atomic_writer
from data.beir import Collection, Qrels, graded_qrels, read_qrels
from data.candidates import corpus_texts
from eval.report.leaderboard_markdown import leaderboard_markdown
from eval.zoo.leaderboard import (
    LeaderboardSettings,
    ScoreMapping,
    human_matrices,
    judged_share,
    label_pool,
    own_systems,
    people_only,
    pool_of,
    reading_matrices,
    reading_result,
    readings,
)
from measure.labelers import Labeler, make_labeler
from measure.zoo.build import ZooBuilder
from measure.zoo.definition import (
    BM25System,
    DenseSystem,
    RandomSystem,
    RerankSystem,
    ZooDefinition,
    read_zoo,
)
from measure.zoo.record import Leaderboard, ReadingResult, SystemRecord


@dataclass
class ZooConfig:
    zoo: str = field(
        default="eval/configs/zoo/standard.yaml",
        metadata={"help": "The zoo's definition: a YAML file of systems (eval/configs/zoo/)."},
    )
    collection: str = field(default="", metadata={"help": "BEIR folder with corpus and queries."})
    qrels: str | None = field(
        default=None,
        metadata={"help": "Human judgments (default: the collection's qrels.tsv)."},
    )
    labelers: list[str] = field(
        default_factory=list,
        metadata={
            "help": "NAME=SPEC for each labeler to rank (any --labeler spec: grader:PATH, "
            "judge:CONFIG.yaml, cosine:EMBEDDER, bm25:COLLECTION, constant:, random:SEED, ...); a "
            "rerank of the zoo may name one as its scorer."
        },
    )
    scorers: list[str] = field(
        default_factory=list,
        metadata={"help": "NAME=SPEC scorers that only rerank (not ranked as labelers)."},
    )
    calibrations: list[str] = field(
        default_factory=list,
        metadata={
            "help": "NAME=METRICS.json: Platt scaling, temperature and threshold of a score labeler "
            "(cosine, bm25) fitted on validation queries: a relevance-grader study baseline row's "
            "metrics.json (e.g. runs/main/cv/fold-0/cosine/metrics.json)."
        },
    )
    related: list[str] = field(
        default_factory=list,
        metadata={
            "help": "NAME=PATTERN[,PATTERN...]: systems a labeler is related to beyond its own "
            "scores (shared weights), for self-preference, e.g. "
            "cross-encoder=dense-exact,dense-hnsw."
        },
    )
    queries: str | None = field(
        default=None,
        metadata={"help": "A file of query ids, one per line: rank on these judged queries only."},
    )
    k: int = bounded(10, 1, help="Hits per query labelled and scored (NDCG@k, P@k, MAP@k).")
    depth: int = bounded(100, 1, help="Hits each retriever returns (what reranks and fusions use).")
    resamples: int = bounded(1000, 100, help="Bootstrap resamples of the queries.")
    ppi_queries: list[int] = field(
        default_factory=lambda: [10, 20],
        metadata={"help": "Numbers of randomly human-judged queries for the PPI++ rows."},
    )
    ppi_draws: int = bounded(200, 10, help="Random draws of those queries.")
    seed: int = field(default=0)
    embedder: str = field(default="minilm-l6", metadata={"help": "The dense systems' embedder."})
    out: str = field(default="runs/zoo", metadata={"help": "Output folder."})
    label_cache: str | None = field(
        default=None, metadata={"help": "Label cache folder (default: OUT/labels)."}
    )


# Labeler kinds whose value is a file or folder, checked before any work.
PATH_KINDS = ("grader", "crossfit", "judge", "qrels", "judgments", "bm25")


def named(entries: Sequence[str], flag: str) -> dict[str, str]:
    """``NAME=VALUE`` entries as a mapping; a bad or repeated name is one line."""
    out: dict[str, str] = {}
    for entry in entries:
        name, sep, value = entry.partition("=")
        if not sep or not name or not value:
            raise InputError(f"{flag}: expected NAME=VALUE, got {entry!r}")
        if name in out:
            raise InputError(f"{flag}: {name!r} is given twice")
        out[name] = value
    return out


def identity(spec: str) -> str:
    """What a system built on a scorer shares with a labeler of this spec (BM25 is one family
    whatever its parameters and collection path)."""
    kind = spec.partition(":")[0]
    return "bm25" if kind == "bm25" else spec


def scorers_of(definition: ZooDefinition, specs: dict[str, str], embedder: str) -> dict:
    """Each system's scorers: whose scores order it (a rerank's scorer, a retriever's own
    score), inherited through shuffles and fusions."""
    out: dict[str, set[str]] = {}
    for system in definition.systems:
        if isinstance(system, BM25System):
            out[system.name] = {"bm25"}
        elif isinstance(system, DenseSystem):
            out[system.name] = {f"cosine:{embedder}"}
        elif isinstance(system, RerankSystem):
            out[system.name] = {identity(specs[system.by])} if system.by in specs else set()
        elif isinstance(system, RandomSystem):
            out[system.name] = set()
        else:
            out[system.name] = set().union(*(out[used] for used in system.uses()))
    return out


def judged_queries(config: ZooConfig, collection: Collection, qrels: Qrels) -> list[str]:
    qids = sorted(q for q in qrels if q in collection.queries)
    if config.queries:
        wanted = {line.strip() for line in Path(config.queries).read_text().splitlines()}
        wanted.discard("")
        unknown = sorted(wanted - set(qids))
        if unknown:
            raise InputError(f"{config.queries}: query {unknown[0]!r} has no judgments here")
        qids = [q for q in qids if q in wanted]
    if len(qids) < 3:
        raise InputError(f"qrels: {len(qids)} judged queries; ranking systems needs at least 3")
    return qids


class ZooRun:
    def __init__(self, config: ZooConfig) -> None:
        self.config = config
        self.out = Path(config.out)
        self.labeler_specs = named(config.labelers, "labelers")
        self.scorer_specs = named(config.scorers, "scorers")
        both = set(self.labeler_specs) & set(self.scorer_specs)
        if both:
            raise InputError(f"scorers: {sorted(both)[0]!r} is a labeler already")
        if not self.labeler_specs:
            raise InputError("labelers: give at least one NAME=SPEC to rank")
        for flag, specs in (("labelers", self.labeler_specs), ("scorers", self.scorer_specs)):
            for name, spec in specs.items():
                kind, _, value = spec.partition(":")
                if kind in PATH_KINDS and not Path(value.partition("#")[0]).exists():
                    raise InputError(f"{flag}: {name}: {value} does not exist")
        calibrations = named(config.calibrations, "calibrations")
        self.related = named(config.related, "related")
        for flag, names in (("calibrations", calibrations), ("related", self.related)):
            unknown = set(names) - set(self.labeler_specs)
            if unknown:
                raise InputError(f"{flag}: {sorted(unknown)[0]!r} is not one of --labelers")
        self.mappings = {name: ScoreMapping.read(path) for name, path in calibrations.items()}
        self.definition = read_zoo(config.zoo)
        self.collection = Collection.load(config.collection)
        qrels_path = config.qrels or str(Path(config.collection) / "qrels.tsv")
        self.qrels_path = qrels_path
        self.qrels = graded_qrels(read_qrels(qrels_path), qrels_path)
        self.qids = judged_queries(config, self.collection, self.qrels)
        cache = Path(config.label_cache or self.out / "labels")
        # One labeler per distinct spec, shared by the reranks and the leaderboard; a cosine
        # labeler reads the documents' vectors the dense systems stored.
        specs = {**self.scorer_specs, **self.labeler_specs}
        corpus = corpus_texts(self.collection)
        by_spec: dict[str, Labeler] = {}
        for spec in specs.values():
            if spec not in by_spec:
                by_spec[spec] = make_labeler(spec, cache_dir=cache, corpus=corpus)
        self.scorers = {name: by_spec[spec] for name, spec in specs.items()}
        self.settings = LeaderboardSettings(
            k=config.k,
            resamples=config.resamples,
            ppi_queries=tuple(config.ppi_queries),
            ppi_draws=config.ppi_draws,
            seed=config.seed,
        )

    def run(self) -> Leaderboard:
        zoo = ZooBuilder(
            self.collection,
            self.qids,
            self.scorers,
            self.out,
            self.config.depth,
            self.config.embedder,
        ).build(self.definition)
        if len(zoo.runs) < 3:
            raise InputError(
                f"zoo: {len(zoo.runs)} systems built; ranking needs at least 3 "
                f"(skipped: {zoo.skipped})"
            )
        names = list(zoo.runs)
        k = self.config.k
        pool = pool_of(zoo.runs, self.qids, k)
        human = human_matrices(self.qrels, zoo.runs, self.qids, k)
        scorers = scorers_of(
            self.definition, self.labeler_specs | self.scorer_specs, self.config.embedder
        )
        readings_out: list[ReadingResult] = []
        for name, spec in self.labeler_specs.items():
            labeler = self.scorers[name]
            print(
                f"labelling {sum(map(len, pool.values()))} pooled pairs with {name} ({spec})",
                flush=True,
            )
            labels = label_pool(labeler, self.collection, pool)
            related = [p for p in self.related.get(name, "").split(",") if p]
            own = own_systems(identity(spec), scorers, related)
            for reading in readings(labels, labeler.verdicts, self.mappings.get(name)):
                matrices = reading_matrices(reading, zoo.runs, pool, k)
                readings_out.append(
                    reading_result(name, spec, reading, human, matrices, names, own, self.settings)
                )
        board = Leaderboard(
            collection=str(self.collection.root),
            qrels=self.qrels_path,
            queries=len(self.qids),
            k=k,
            pooled_pairs=sum(map(len, pool.values())),
            human_share_relevant=human_share(self.qrels, pool),
            resamples=self.config.resamples,
            systems=[
                SystemRecord(
                    name=name,
                    kind=self.definition.system(name).kind,
                    human={m: float(values[i].mean()) for m, values in human.items()},
                    judged_at_k=judged_share(self.qrels, zoo.runs[name], self.qids, k),
                    seconds=zoo.seconds[name],
                )
                for i, name in enumerate(names)
            ],
            skipped=zoo.skipped,
            people_only=people_only(human, self.settings),
            readings=readings_out,
        )
        board.write(self.out / Leaderboard.FILE)
        with atomic_writer(self.out / "leaderboard.md") as handle:
            handle.write(leaderboard_markdown(board))
        return board


def human_share(qrels: Qrels, pool: dict[str, list[str]]) -> float:
    from core.records import label_from_grade

    pairs = [(q, d) for q, docs in pool.items() for d in docs]
    relevant = sum(label_from_grade(int(qrels.get(q, {}).get(d, 0))) for q, d in pairs)
    return relevant / max(1, len(pairs))


def main(args: Sequence[str] | None = None) -> None:
    (config,) = parse_config([ZooConfig], args)
    if not config.collection:
        raise InputError("collection: give --collection (a BEIR folder with qrels)")
    board = ZooRun(config).run()
    print(leaderboard_markdown(board))
    print(f"wrote {Path(config.out) / Leaderboard.FILE} and leaderboard.md")


if __name__ == "__main__":
    run_main(main)
