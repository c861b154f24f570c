"""Judge hits in the browser: ``relevance-grader annotate``.

    relevance-grader annotate --corpus data/collections/trec-dl-2019-passage \\
        --runs runs/main/candidates/bm25.trec runs/main/candidates/dense.trec \\
        --draw runs/judging/draw.json --out runs/judging --assessors alice bob
    relevance-grader annotate --out runs/judging                  # resume: the session has the rest
    relevance-grader annotate agreement --judgments runs/judging  # two assessors: κ, disagreements

Every input is checked before the server starts (a run naming a document the corpus lacks, an
empty sample, a port in use, an output folder of another corpus or sample, a folder another
server is judging into, a weak ``.secret``: one line, exit 2). Then it prints one secret link per
assessor, ``http://HOST:PORT/?token=TOKEN`` (with ``--host 0.0.0.0``, HOST is this machine's
outward address, never 0.0.0.0), and serves the page until Ctrl-C; the judgments are on disk as
they are made (:mod:`judgments.store`). The assessors, the labeler's labels, the reveal mode
and the highlighting are recorded in ``session.json``: a restart with ``--out`` alone keeps them.
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import socket
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from core.cli import bounded, choice, parse_config, run_main
from core.errors import InputError
from core.io import sha256_file
from data.beir import read_corpus, read_named_runs, read_queries
from judgments.annotate.app import REVEALS, Judging, create_app, valid_assessor
from judgments.annotate.pool import pool_hits, read_sample
from judgments.store import (
    JUDGMENTS_FILE,
    CorpusFile,
    JudgingSession,
    JudgmentStore,
    check_out,
    hold_session,
    new_session,
    session_secret,
    write_session,
)


@dataclass
class AnnotateConfig:
    corpus: str = field(
        default="",
        metadata={"help": "BEIR folder (corpus.jsonl, queries.jsonl) the runs retrieved from."},
    )
    runs: list[str] = field(
        default_factory=list, metadata={"help": "TREC runs whose top k are pooled and judged."}
    )
    draw: str | None = field(
        default=None,
        metadata={
            "help": "The sample: a draw file of relevance-grader ppi --out (its design goes to "
            "relevance-grader search), or a text file of query ids (or `qid doc_id` hits), one per "
            "line."
        },
    )
    queries: list[str] = field(
        default_factory=list, metadata={"help": "Or the query ids to judge, on the command line."}
    )
    k: int = bounded(10, 1, help="Hits per run and query that are pooled.")
    out: str = field(
        default="runs/judging",
        metadata={"help": "Session folder: session.json, judgments.jsonl, qrels.txt."},
    )
    assessor: str | None = field(
        default=None,
        metadata={
            "help": "Who judges (default: the session's assessors, else $USER); each assessor "
            "gets a secret link printed at start."
        },
    )
    assessors: list[str] = field(
        default_factory=list,
        metadata={"help": "Several assessors, each with a link of their own (--assessors a b)."},
    )
    labels: str | None = field(
        default=None,
        metadata={
            "help": "relevance-grader search output (folder or per_query.json): the labeler's "
            "labels, revealed only as --reveal says (default: the session's)."
        },
    )
    reveal: str | None = choice(
        None,
        REVEALS,
        help="When the labeler's verdicts are shown: at the end of the assessor's session (end, "
        "the default), or after each query (per-query: for training assessors).",
    )
    highlight: bool | None = field(
        default=None,
        metadata={
            "help": "Mark the query's terms in the passage (default: true, or the session's)."
        },
    )
    adjudicate: bool | None = field(
        default=None,
        metadata={"help": "Serve only the hits assessors graded differently; this grade wins."},
    )
    seed: int = field(default=0, metadata={"help": "Seed of the hashed order hits are shown in."})
    host: str = field(
        default="127.0.0.1",
        metadata={
            "help": "Address to listen on; 0.0.0.0 (every interface) for assessors on other "
            "machines: the links then use this machine's outward address."
        },
    )
    port: int = bounded(8765, 0, 65535, help="Port to listen on (0: any free port).")


def new_session_for(config: AnnotateConfig, corpus: dict, queries: dict) -> JudgingSession:
    """The session the inputs describe: the sample, its pooled hits, the draw's design."""
    units, design = read_sample(config.draw, config.queries)
    by_hits = all(isinstance(u, tuple) for u in units)
    if not config.runs and not by_hits:
        raise InputError("runs: give --runs RUN.trec ... whose top k are judged")
    runs = read_named_runs(config.runs, "runs", same_queries=False) if config.runs else {}
    files = {Path(p).stem: p for p in config.runs} | {"sample": config.draw or "--queries"}
    corpus_file = Path(config.corpus) / "corpus.jsonl"
    pool = pool_hits(
        units, runs, config.k, config.seed, corpus, files | {"corpus": str(corpus_file)}
    )
    for qid in pool:
        if qid not in queries:
            raise InputError(f"queries: query {qid!r} of the sample is not in the queries file")
    # The sample is recorded as "sample", not as a run: "runs" holds only the judged runs.
    runs_only = {name: path for name, path in files.items() if name != "sample"}
    session = new_session(corpus_file, runs_only, config.k, config.seed, pool)
    session.draw, session.sample = (design.to_dict() if design else None), files["sample"]
    return session


def resolve(config: AnnotateConfig) -> tuple[JudgingSession, dict, dict]:
    """(session, corpus, queries): from the inputs, or from the session folder alone (resume)."""
    out = Path(config.out)
    old = JudgingSession.of_folder(out) if out.is_dir() else None
    fresh = bool(config.runs or config.draw or config.queries)
    if not fresh and old is None:
        raise InputError(
            "give --corpus, --runs and --draw (or --queries), or the --out of a session to resume"
        )
    if fresh and not config.corpus:
        raise InputError("corpus: give --corpus DIR, the BEIR folder the runs retrieved from")
    folder = Path(config.corpus) if config.corpus else Path(old.corpus.path).parent
    if not (folder / "corpus.jsonl").is_file() or not (folder / "queries.jsonl").is_file():
        raise FileNotFoundError(
            f"corpus: {folder} has no corpus.jsonl and queries.jsonl (a BEIR folder)"
        )
    corpus, queries = read_corpus(folder / "corpus.jsonl"), read_queries(folder / "queries.jsonl")
    if fresh:
        session = new_session_for(config, corpus, queries)
    else:
        corpus_file = folder / "corpus.jsonl"
        found = CorpusFile(path=str(corpus_file), sha256=sha256_file(corpus_file))
        session = old.model_copy(update={"corpus": found})
    check_out(out, session)
    return session.model_copy(update=settings(config, old, out)), corpus, queries


# A session that records no settings: what settings() falls back from.
EMPTY = JudgingSession(corpus=CorpusFile(path="", sha256=""), runs={}, k=1, seed=0, pool=[])


def settings(config: AnnotateConfig, old: JudgingSession | None, out: Path) -> dict[str, Any]:
    """How the session is judged: what is given, else what the session recorded (a restart with
    --out alone forgets nothing), else the defaults. The reveal mode and the highlighting of a
    session with judgments are fixed: a change would mix two ways of judging in one sample."""
    given = [config.assessor] if config.assessor else []
    names = list(dict.fromkeys(given + list(config.assessors)))
    for name in names:
        valid_assessor(name)
    default_name = os.environ.get("USER") or "assessor"
    recorded = old or EMPTY  # the settings a session started before they were recorded has
    chosen = {
        "assessors": names or recorded.assessors or [valid_assessor_or(default_name)],
        "labels": str(Path(config.labels).resolve()) if config.labels else recorded.labels,
        # New people named without --adjudicate judge as assessors, not as an adjudicator.
        "adjudicate": config.adjudicate
        if config.adjudicate is not None
        else (False if names else bool(recorded.adjudicate)),
    }
    judged = (out / JUDGMENTS_FILE).is_file() and (out / JUDGMENTS_FILE).stat().st_size > 0
    for name, value, default in (
        ("reveal", config.reveal, "end"),
        ("highlight", config.highlight, True),
    ):
        before = getattr(recorded, name)
        if value is not None and before is not None and value != before and judged:
            shown = str(before).lower()
            raise InputError(
                f"{name}: {out} was judged with --{name} {shown}; give the same (or none), or "
                "another --out"
            )
        chosen[name] = value if value is not None else (before if before is not None else default)
    return chosen


def first_run_rankings(session: JudgingSession) -> dict[str, list[str]] | None:
    """The first judged run's top k of each pooled query, for the width the judging reaches;
    None where the run file is no longer there (the page then shows counts only)."""
    from data.beir import ranked, read_trec_run

    runs = list(session.runs.values())
    if not runs or not Path(runs[0]).is_file():
        return None
    run = read_trec_run(runs[0])
    return {
        qid: [doc_id for doc_id, _ in ranked(run[qid])[: session.k]]
        for qid, _ in session.pool
        if qid in run
    }


def valid_assessor_or(name: str) -> str:
    """$USER as the default assessor, or "assessor" where the login name is not a valid one."""
    try:
        return valid_assessor(name)
    except ValueError:
        return "assessor"


def bind(host: str, port: int) -> socket.socket:
    """The listening socket, bound before the server starts so a port in use is one error."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
        sock.listen(128)  # a browser that connects before uvicorn is up waits in the backlog
    except OSError as exc:
        sock.close()
        raise InputError(
            f"port: {host}:{port} cannot be used ({exc.strerror}); give another --port"
        ) from None
    return sock


def labeler_labels(path: str | None) -> dict[tuple[str, str], dict[str, Any]] | None:
    """{(qid, doc_id): the labeler's verdict} from eval.search's per_query.json."""
    if not path:
        return None
    from judgments.draw import read_labels

    return {
        (qid, hit.id): hit.model_dump(include={"relevant", "score", "grade"})
        for queries in read_labels(path).values()
        for qid, result in queries.items()
        for hit in result.hits
    }


WILDCARDS = ("0.0.0.0", "::", "")  # listen on every interface: no address to open


def outward_address(host: str) -> str | None:
    """The address other machines reach this one by: the source address of its route outwards
    (a UDP socket's connect sends nothing), None where there is no such route."""
    family, probe = (
        (socket.AF_INET6, "2001:db8::1") if ":" in host else (socket.AF_INET, "192.0.2.1")
    )  # documentation addresses (RFC 3849, 5737): only the route to them is looked up
    with socket.socket(family, socket.SOCK_DGRAM) as udp:
        try:
            udp.connect((probe, 9))
        except OSError:
            return None
        address = udp.getsockname()[0]
    return None if ipaddress.ip_address(address).is_loopback else address


def link_host(host: str) -> str:
    """The host of the printed links: the listening address, or where that is every interface,
    this machine's outward address (its name where it has none)."""
    if host not in WILDCARDS:
        return host
    return outward_address(host) or socket.gethostname()


def allowed_hosts(host: str) -> list[str]:
    """The Host names the server answers: its own address and, when it listens on every
    interface, the links' host and this machine's names (the app also answers any address a
    request arrived at)."""
    hosts = ["127.0.0.1", "localhost", "::1", host, link_host(host)]
    if host in WILDCARDS:
        name = socket.gethostname()
        hosts += [name, socket.getfqdn()]
        with contextlib.suppress(OSError):  # the machine's addresses, as other machines use them
            hosts += socket.gethostbyname_ex(name)[2]
    return hosts


def every_interface_note(host: str, shown: str) -> str:
    """What to give the assessors when the server listens on every interface."""
    what = (
        "this machine's address on its route outwards"
        if shown != socket.gethostname()
        else "this machine's name (it has no route outwards)"
    )
    return (
        f"listening on every interface ({host or '0.0.0.0'}); the links use {shown}, {what}: "
        f"if the assessors reach it by another of its addresses or by its name "
        f"({socket.gethostname()}), give them the link with that host instead, which the server "
        "answers too"
    )


def serve(config: AnnotateConfig) -> None:
    import uvicorn

    session, corpus, queries = resolve(config)
    labels = labeler_labels(session.labels)
    sock = bind(config.host, config.port)
    out = Path(config.out)
    port = sock.getsockname()[1]
    shown = link_host(config.host)
    base = f"http://{f'[{shown}]' if ':' in shown else shown}:{port}/"
    try:
        release = hold_session(out, base)  # one server per session folder
    except ValueError:
        sock.close()
        raise
    try:
        write_session(out, session)
        store = JudgmentStore(out)
        pool = dict(session.pool)
        documents = {d: corpus[d] for docs in pool.values() for d in docs}
        judging = Judging(
            pool,
            queries,
            documents,
            store,
            labels,
            session.assessors,
            session.adjudicate,
            seed=session.seed,
            reveal=session.reveal,
            highlight=session.highlight,
            secret=session_secret(out),
            rankings=first_run_rankings(session),
            k=session.k,
        )
        print(f"judging {len(judging.hits)} hits of {len(pool)} queries into {out}", flush=True)
        for name in judging.assessors:  # a secret link each: the token is who is judging
            print(f"open {base}?token={judging.token(name)} as {name}", flush=True)
        if config.host in WILDCARDS:
            print(every_interface_note(config.host, shown), flush=True)
        print("each link is its assessor's alone; Ctrl-C stops the server", flush=True)
        app = create_app(judging, allowed_hosts(config.host), port)
        server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
        try:
            server.run(sockets=[sock])
        finally:
            store.close()
    finally:
        release()


def main(args: Sequence[str] | None = None) -> None:
    (config,) = parse_config([AnnotateConfig], args)
    serve(config)


if __name__ == "__main__":
    run_main(main)
