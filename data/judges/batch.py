"""Teacher labels through a Batch API: OpenAI's and Azure OpenAI's (about half the price of
synchronous calls, results within the completion window), or vLLM's offline ``run-batch``.

The requests are the synchronous path's own (``ChatClient.body``: prompts, sampling settings,
o-series rules, log-probabilities), one line per pair and sample, ``custom_id`` = the pair's
cache key and the sample. Everything a run submits or receives is recorded beside the output
before the next step (``OUT.batches.json``, request and result files in ``OUT.batches/``, named
relative to the record), so a killed or restarted command polls the batches it submitted instead
of paying for them again, and re-reads every result it downloaded; a later run with other pairs
uses the results of its own and sets the others aside. Each result becomes a judgment through the synchronous
path's parser and lands in the same cache. A reply that is not an answer (or a request that
failed) is asked again in a later batch, synchronously, or left as an ``error`` record
(``--batch_retry``); requests a batch did not reach before it expired or was cancelled were not
paid for and go into the next batch.
"""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, TypedDict

from tqdm.auto import tqdm

from core.errors import InputError
from core.io import write_json
from core.records import Judgment, Pair, Usage
from data.judges.backends import (
    Backend,
    ChatJudge,
    JudgeConfig,
    OnResult,
    majority,
    verdict_from_response,
)
from data.judges.prompts import Prompt
from models.llm_client import provider_error

logger = logging.getLogger(__name__)

# Where each provider's batch lines point (Azure OpenAI's batch endpoint has no /v1).
BATCH_URL = {
    "openai": "/v1/chat/completions",
    "azure": "/chat/completions",
    "vllm": "/v1/chat/completions",
}
FINISHED = ("completed", "failed", "expired", "cancelled")
# Error codes of requests a batch never ran (not paid for): submitted again, not counted as tries.
NOT_RUN = ("batch_expired", "batch_cancelled")
# vLLM's offline batch runner (the same request and result format as the Batch API).
VLLM_RUN_BATCH = [sys.executable, "-m", "vllm.entrypoints.openai.run_batch"]


class BatchError(InputError):
    """A batch the provider refused, failed or no longer knows: one line, nothing paid for lost."""


@dataclass
class SubmittedBatch:
    """One batch as recorded in ``OUT.batches.json`` (written before and after each step); its
    files are named relative to the record, so the output folder can move."""

    requests_file: str
    requests: int
    input_file_id: str | None = None
    id: str | None = None
    status: str = "uploading"
    output_file: str | None = None
    error_file: str | None = None
    downloaded: bool = False


@dataclass
class BatchState:
    path: Path
    batches: list[SubmittedBatch] = field(default_factory=list)

    @classmethod
    def load(cls, path: Path) -> BatchState:
        if not path.exists():
            return cls(path)
        try:
            raw = json.loads(path.read_text(encoding="utf-8"))
            return cls(path, [SubmittedBatch(**entry) for entry in raw["batches"]])
        except (ValueError, KeyError, TypeError) as exc:
            raise InputError(
                f"{path}: not a batch record ({exc}); it lists batches already paid for, so it is "
                "not replaced: repair it or move it away"
            ) from None

    def save(self) -> None:
        write_json(self.path, {"batches": [asdict(b) for b in self.batches]})

    @property
    def folder(self) -> Path:
        return self.path.with_suffix("")

    def relative(self, path: Path) -> str:
        """How the record names a file of its folder: relative to the record."""
        return str(path.relative_to(self.path.parent))

    def file(self, name: str) -> Path:
        """A file the record names, relative to the record (so the output folder can move)."""
        path = self.path.parent / name
        if not path.exists():
            raise BatchError(
                f"{self.path}: names {name}, which is not there; the "
                f"batch files were moved or deleted: put {self.folder.name}/ back beside "
                f"{self.path.name}, or move both away to start over (batches in it are paid for)"
            )
        return path

    def requested(self, record: SubmittedBatch) -> set[str]:
        """The custom ids a batch asked for (its request file)."""
        lines = self.file(record.requests_file).read_text(encoding="utf-8").splitlines()
        return {str(json.loads(line)["custom_id"]) for line in lines if line.strip()}

    def in_flight(self) -> list[SubmittedBatch]:
        return [b for b in self.batches if not b.downloaded]


class OpenAIBatches:
    """Files and batches through the ``openai`` SDK (OpenAI, Azure OpenAI, any server with them)."""

    def __init__(self, config: JudgeConfig) -> None:
        import openai

        from models.llm_client import openai_client

        self.openai = openai
        self.client = openai_client(config, asynchronous=False)
        self.url = BATCH_URL[config.backend]
        self.window = config.batch_completion_window

    def _call(self, what: str, call: Callable[[], Any], not_found: str | None = None) -> Any:
        """A provider call whose failure (after the SDK's retries) is one line."""
        try:
            return call()
        except self.openai.NotFoundError:
            raise BatchError(
                f"{what}: {not_found or 'no longer exists at the provider (404)'}"
            ) from None
        except self.openai.APIStatusError as exc:
            raise BatchError(
                f"{what}: the provider refused ({exc.status_code}): {_message(exc)}"
            ) from None
        except self.openai.APIError as exc:
            raise BatchError(f"{what}: {type(exc).__name__}: {exc}") from None

    def upload(self, path: Path) -> str:
        def call() -> str:
            with path.open("rb") as handle:
                return self.client.files.create(file=handle, purpose="batch").id

        # A 404 on the first call is an endpoint without the Files and Batch APIs.
        no_batch_api = (
            f"the endpoint ({self.client.base_url}) has no Batch API (404 on its files route): "
            "local servers (llama.cpp, vLLM's, Ollama) answer one request at a time; run "
            "without --batch"
        )
        return self._call(f"uploading {path}", call, not_found=no_batch_api)

    def find(self, input_file_id: str) -> str | None:
        """The batch made from ``input_file_id``, when a kill came between creating it and
        recording its id."""
        batches = self._call("listing batches", lambda: list(self.client.batches.list(limit=100)))
        return next((b.id for b in batches if b.input_file_id == input_file_id), None)

    def create(self, input_file_id: str) -> str:
        return self._call(
            f"creating a batch from {input_file_id}",
            lambda: (
                self.client.batches.create(
                    input_file_id=input_file_id, endpoint=self.url, completion_window=self.window
                ).id
            ),
        )

    def retrieve(self, batch_id: str) -> Any:
        return self._call(f"batch {batch_id}", lambda: self.client.batches.retrieve(batch_id))

    def content(self, file_id: str) -> str:
        return self._call(f"file {file_id}", lambda: self.client.files.content(file_id).text)


class VllmRunBatch:
    """vLLM's offline runner: a "batch" is one ``run_batch`` process, finished when it returns."""

    def __init__(self, config: JudgeConfig) -> None:
        self.model = config.model
        self.url = BATCH_URL["vllm"]

    def upload(self, path: Path) -> str:
        return str(path)

    def find(self, input_file_id: str) -> str | None:
        return None

    def create(self, input_file_id: str) -> str:
        output = input_file_id.removesuffix(".requests.jsonl") + ".results.jsonl"
        command = [*VLLM_RUN_BATCH, "-i", input_file_id, "-o", output, "--model", self.model]
        result = subprocess.run(command, capture_output=True, text=True)
        if result.returncode != 0:
            tail = (result.stderr.strip().splitlines() or ["no message"])[-1]
            raise BatchError(f"vllm run_batch on {input_file_id} failed: {tail}")
        return output

    def retrieve(self, batch_id: str) -> Any:
        return _LocalBatch(batch_id)

    def content(self, file_id: str) -> str:
        return Path(file_id).read_text(encoding="utf-8")


@dataclass
class _LocalBatch:
    output_file_id: str
    status: str = "completed"
    error_file_id: str | None = None
    errors: Any = None


def _message(exc: Any) -> str:
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and inner.get("message"):
            return str(inner["message"])
    return str(exc)


@dataclass
class _BatchLines:
    """What reading one batch's results needs: the custom ids it asked for, and whether its
    failed tries count (downloaded by this run) or not (an earlier run gave up on them)."""

    requested: set[str]
    counts_tries: bool


@dataclass
class _Outcome:
    """What the downloaded results say about one pair."""

    replies: dict[int, Any] = field(default_factory=dict)  # sample → parsed verdict
    usage: Usage = field(default_factory=Usage)
    tries: int = 0
    problem: str = ""
    final: bool = False  # the model refused: not asked again


class BatchRun(TypedDict):
    """How a --batch true labelling went (data.label's summary keeps it as ``batches``)."""

    batches: int  # submitted to the provider, over every round
    rounds: int


class BatchJudge:
    """Judges pairs through a batch provider; ``run`` calls ``on_result`` once per pair."""

    def __init__(
        self,
        backend: ChatJudge,
        config: JudgeConfig,
        prompt: Prompt,
        state_path: Path,
        provider: Any = None,
        sync_backend: Callable[[], Backend] | None = None,
    ) -> None:
        self.backend, self.config, self.prompt = backend, config, prompt
        self.state = BatchState.load(state_path)
        if provider is None:
            provider = VllmRunBatch(config) if config.backend == "vllm" else OpenAIBatches(config)
        self.provider = provider
        self.sync_backend = sync_backend
        self.samples = max(1, config.samples)
        self.unknown: list[str] = []
        # Failed tries count from the batches this run downloads: a re-run asks again what an
        # earlier run gave up on (as --retry_errors does for the synchronous path).
        self.read_before = {b.requests_file for b in self.state.batches if b.downloaded}
        self._requested: dict[str, set[str]] = {}  # request file -> the custom ids it holds

    @classmethod
    def for_config(
        cls,
        config: JudgeConfig,
        prompt: Prompt,
        state_path: Path,
        sync_backend: Callable[[], Backend] | None = None,
    ) -> BatchJudge:
        """The batch judge of ``--batch true``: requests built as the synchronous backend builds
        them (without loading a vLLM engine here: ``run_batch`` loads its own)."""
        backend = ChatJudge(config, prompt, load=False)
        return cls(backend, config, prompt, state_path, sync_backend=sync_backend)

    # requests
    def custom_id(self, key: str, sample: int) -> str:
        return f"{key}:{sample}"

    def request_line(self, pair: Pair, key: str, sample: int) -> str:
        return json.dumps(
            {
                "custom_id": self.custom_id(key, sample),
                "method": "POST",
                "url": self.provider.url,
                "body": self.backend.chat_request(pair),
            },
            ensure_ascii=False,
        )

    def chunks(self, lines: list[str]) -> list[list[str]]:
        """Lines split at the provider's limits (requests and bytes per batch file)."""
        out: list[list[str]] = [[]]
        size = 0
        for line in lines:
            length = len(line.encode("utf-8")) + 1
            if length > self.config.batch_max_bytes:
                raise InputError(
                    f"batch_max_bytes: one request is {length} bytes, over the limit of "
                    f"{self.config.batch_max_bytes}; lower --max_document_chars"
                )
            if out[-1] and (
                len(out[-1]) >= self.config.batch_max_requests
                or size + length > self.config.batch_max_bytes
            ):
                out.append([])
                size = 0
            out[-1].append(line)
            size += length
        return [chunk for chunk in out if chunk]

    # submitting and polling
    def submit(self, lines: list[str]) -> None:
        folder = self.state.folder
        folder.mkdir(parents=True, exist_ok=True)
        for chunk in self.chunks(lines):
            number = len(self.state.batches)
            path = folder / f"{number:04d}.requests.jsonl"
            path.write_text("".join(line + "\n" for line in chunk), encoding="utf-8")
            record = SubmittedBatch(requests_file=self.state.relative(path), requests=len(chunk))
            self.state.batches.append(record)
            self.state.save()
            self._create(record)

    def _create(self, record: SubmittedBatch) -> None:
        if record.input_file_id is None:
            record.input_file_id = self.provider.upload(self.state.file(record.requests_file))
            self.state.save()
        if record.id is None:
            record.id = self.provider.find(record.input_file_id)
        if record.id is None:
            try:
                record.id = self.provider.create(record.input_file_id)
            except BatchError as exc:
                submitted = sum(1 for b in self.state.batches if b.id)
                raise BatchError(
                    f"{exc}; {submitted} batch(es) already submitted are recorded in "
                    f"{self.state.path} and a re-run polls them instead of paying again"
                ) from None
        record.status = "submitted"
        self.state.save()

    def wait(self) -> None:
        """Poll every batch in flight until it finishes, then download its result files."""
        live = self.state.in_flight()
        for record in live:
            if record.id is None:  # killed before the batch was created
                self._create(record)
        total = sum(b.requests for b in live)
        bar = tqdm(total=total, desc="batches", unit="request", file=sys.stderr, disable=not live)
        try:
            while live:
                for record in list(live):
                    try:
                        batch = self.provider.retrieve(record.id)
                    except BatchError as exc:
                        raise BatchError(
                            f"{self.state.path}: {exc}; remove its entry to submit its pairs again"
                        ) from None
                    record.status = batch.status
                    if batch.status in FINISHED:
                        self._download(record, batch)
                        live.remove(record)
                        bar.update(record.requests)
                if live:
                    time.sleep(self.config.batch_poll_seconds)
        finally:
            bar.close()

    def _download(self, record: SubmittedBatch, batch: Any) -> None:
        folder = self.state.folder
        stem = Path(record.requests_file).name.removesuffix(".requests.jsonl")
        for kind, file_id in (("output", batch.output_file_id), ("error", batch.error_file_id)):
            if file_id:
                path = folder / f"{stem}.{kind}.jsonl"
                path.write_text(self.provider.content(file_id), encoding="utf-8")
                setattr(record, f"{kind}_file", self.state.relative(path))
        record.downloaded = True
        self.state.save()
        if batch.status == "failed":
            errors = getattr(getattr(batch, "errors", None), "data", None) or []
            first = errors[0] if errors else None
            detail = (
                f"{getattr(first, 'message', first)} (line {getattr(first, 'line', '?')})"
                if first
                else "no reason given"
            )
            raise BatchError(
                f"batch {record.id} ({record.requests_file}) failed: {detail}; its requests were "
                "not run (not paid for) and a re-run submits them again"
            )

    # results
    def read_results(self, pairs_by_key: dict[str, Pair]) -> dict[str, _Outcome]:
        """Every downloaded result line, per pair of this run (re-read on each run: nothing is
        lost). Results of earlier runs' pairs that this run does not ask for (judged before, in
        the cache, or left out of this run) are set aside; a line its batch never asked for is
        a stray."""
        outcomes: dict[str, _Outcome] = defaultdict(_Outcome)
        self.unknown = []
        for record in self.state.batches:
            if not (record.output_file or record.error_file):
                continue
            if record.requests_file not in self._requested:  # read once per run
                self._requested[record.requests_file] = self.state.requested(record)
            batch = _BatchLines(
                self._requested[record.requests_file], record.requests_file not in self.read_before
            )
            for name in (record.output_file, record.error_file):
                if not name:
                    continue
                lines = self.state.file(name).read_text(encoding="utf-8").splitlines()
                for number, line in enumerate(lines, 1):
                    if line.strip():
                        self._read_line(f"{name}:{number}", line, batch, pairs_by_key, outcomes)
        return outcomes

    def _read_line(
        self,
        where: str,
        line: str,
        batch: _BatchLines,
        pairs_by_key: dict[str, Pair],
        outcomes: dict[str, _Outcome],
    ) -> None:
        from openai.types.chat import ChatCompletion

        try:
            result = json.loads(line)
            key, _, sample_text = str(result["custom_id"]).rpartition(":")
            sample = int(sample_text)
        except (ValueError, KeyError, TypeError):
            self.unknown.append(f"{where}: not a batch result line")
            return
        if str(result["custom_id"]) not in batch.requested:
            self.unknown.append(
                f"{where}: custom_id {result['custom_id']!r} is no request of its batch"
            )
            return
        if key not in pairs_by_key:
            return  # an earlier run's pair that this run does not ask for
        counts = batch.counts_tries
        outcome = outcomes[key]
        if sample in outcome.replies:
            return  # answered by an earlier batch
        error = result.get("error") or {}
        response = result.get("response") or {}
        if error.get("code") in NOT_RUN:
            return  # never run, not paid for: submitted again
        status = response.get("status_code")
        if error or status != 200:
            message = error.get("message") or json.dumps(response.get("body", {}))[:200]
            outcome.tries += counts
            outcome.problem = f"request failed ({status or error.get('code')}): {message}"
            return
        try:
            completion = ChatCompletion.model_validate(response["body"])
        except (KeyError, ValueError) as exc:
            outcome.tries += counts
            said = provider_error(response.get("body"))
            outcome.problem = (
                f"a 200 response with an error in its body: {said[:300]}"
                if said
                else f"malformed response body: {str(exc)[:200]}"
            )
            return
        read = verdict_from_response(self.prompt, completion)
        outcome.usage.input_tokens += read.usage.input_tokens
        outcome.usage.output_tokens += read.usage.output_tokens
        if read.verdict is None:
            outcome.tries += counts
            outcome.problem = read.problem
            outcome.final = outcome.final or read.final
        else:
            outcome.replies[sample] = read.verdict

    def judgment(self, pair: Pair, outcome: _Outcome, error: str | None = None) -> Judgment:
        verdicts = [outcome.replies[s] for s in sorted(outcome.replies)]
        if error is not None or not verdicts:
            judgment = self.backend.judgment(pair, None, outcome.usage, error=error)
        else:
            judgment = self.backend.judgment(pair, majority(verdicts), outcome.usage)
        info = judgment.judge.model_copy(update={"backend": f"{self.backend.name}-batch"})
        return judgment.model_copy(update={"judge": info})

    # the whole run
    def run(self, pairs: Sequence[Pair], keys: Sequence[str], on_result: OnResult) -> BatchRun:
        """Judge ``pairs`` (cache ``keys``), using every result already in the batch folder."""
        pairs_by_key = dict(zip(keys, pairs, strict=True))
        reported: set[str] = set()
        rounds = 0
        while True:
            self.wait()
            outcomes = self.read_results(pairs_by_key)  # nothing is in flight now
            to_ask: list[str] = []
            given_up: list[str] = []
            for key, pair in pairs_by_key.items():
                if key in reported:
                    continue
                outcome = outcomes.get(key, _Outcome())
                if len(outcome.replies) == self.samples:
                    on_result(self.judgment(pair, outcome))
                    reported.add(key)
                    continue
                retry_in_batch = self.config.batch_retry == "batch"
                if outcome.tries and (
                    outcome.final
                    or not (retry_in_batch and outcome.tries <= self.config.parse_retries)
                ):
                    given_up.append(key)
                    continue
                for sample in range(self.samples):
                    if sample not in outcome.replies:
                        to_ask.append(self.request_line(pair, key, sample))
            if to_ask:
                rounds += 1
                logger.info("submitting %d requests (round %d)", len(to_ask), rounds)
                self.submit(to_ask)
                continue
            break
        self._finish(given_up, pairs_by_key, outcomes, on_result, reported)
        if self.unknown:
            raise BatchError(
                f"{len(self.unknown)} result line(s) match no request of their batch, first "
                f"{self.unknown[0]}; every other result is in the cache"
            )
        return {"batches": len(self.state.batches), "rounds": rounds}

    def _finish(
        self,
        given_up: list[str],
        pairs_by_key: dict[str, Pair],
        outcomes: dict[str, _Outcome],
        on_result: OnResult,
        reported: set[str],
    ) -> None:
        again = [k for k in given_up if not outcomes[k].final]  # a refusal is not asked again
        if again and self.config.batch_retry == "sync" and self.sync_backend is not None:
            backend = self.sync_backend()
            try:
                backend.run([pairs_by_key[k] for k in again], on_result)
            finally:
                backend.close()
            reported.update(again)
        for key in (k for k in given_up if k not in reported):
            outcome = outcomes[key]
            on_result(
                self.judgment(
                    pairs_by_key[key],
                    outcome,
                    error=f"unanswered after {outcome.tries} batch attempt(s): {outcome.problem}",
                )
            )
            reported.add(key)
