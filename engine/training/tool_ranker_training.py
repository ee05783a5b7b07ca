"""Training the tool ranker (:mod:`..tool_ranker`) on the corpus's training split.

Each conversation of the training split that ends in a request with calls is one
example: the request, the listed tools, and the tools its calls use. The loss is
the negative log of the softmax mass the ranker gives those tools among the
listed ones. The pooling scores start at zero (a plain mean) and the projection
at the identity, so an untrained ranker is the cosine of :mod:`..tool_similarity`
on the whole request; nothing is drawn at random but the corpus and the order,
both from the options' seeds. A minute on two CPU cores.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass

import torch

from ..tool_ranker import ToolRanker, request_text
from ..tool_similarity import WordVectors, tool_text
from .corpus import CORPUS_VERSION, CorpusGenerator, Sample

log = logging.getLogger(__name__)

#: Conversation kinds whose last user message is a request the calls answer.
_REQUEST_KINDS = frozenset({"call", "parallel"})


@dataclass(frozen=True)
class RankerTraining:
    """What a ranker is trained on and how; the defaults made the packaged one."""

    samples: int = 60_000  # conversations drawn (about half end in calls)
    epochs: int = 1
    batch_size: int = 64
    learning_rate: float = 1e-3
    corpus_seed: int = 11
    order_seed: int = 0

    def __post_init__(self) -> None:
        for name in ("samples", "epochs", "batch_size"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1, got {getattr(self, name)}")
        if not self.learning_rate > 0:
            raise ValueError(f"learning_rate must be > 0, got {self.learning_rate}")


@dataclass(frozen=True)
class RankedRequest:
    """One example: a request, its listed tools, and the tools its calls use."""

    request: str
    tools: tuple[object, ...]  # ToolSpec, or anything with a name and a description
    wanted: frozenset[str]


def ranked_requests(samples: Iterable[Sample]) -> list[RankedRequest]:
    """The examples of ``samples``: those whose last message is a request answered by calls."""
    out = []
    for sample in samples:
        if sample.kind in _REQUEST_KINDS and sample.calls:
            wanted = frozenset(name for name, _ in sample.calls)
            out.append(RankedRequest(sample.messages[-1].content, sample.tools, wanted))
    return out


def top_choice_rate(score: object, examples: Sequence[RankedRequest]) -> float:
    """How often the ``len(wanted)`` best-scored tools are exactly the wanted ones;
    ``score(request, tools)`` returns a score per tool name."""
    if not examples:
        raise ValueError("no examples to rate")
    hits = 0
    for ex in examples:
        scores = score(ex.request, ex.tools)  # type: ignore[operator]
        best = sorted(scores, key=lambda name: -scores[name])[: len(ex.wanted)]
        hits += set(best) == ex.wanted
    return hits / len(examples)


def train_ranker(
    options: RankerTraining = RankerTraining(), vectors: WordVectors | None = None
) -> tuple[ToolRanker, dict[str, object]]:
    """A ranker trained per ``options`` over ``vectors`` (the ``wordllama`` package's
    by default), and what made it (for ``config.json``)."""
    vectors = vectors if vectors is not None else WordVectors.load()
    started = time.perf_counter()
    examples = ranked_requests(
        CorpusGenerator("train", options.corpus_seed).samples(options.samples)
    )
    if not examples:
        raise ValueError(f"{options.samples} samples hold no request with calls")
    encoded = [_encode(ex, vectors) for ex in examples]
    net = RankerNet(torch.from_numpy(vectors.table.astype("float32")))
    optimizer = torch.optim.Adam(net.parameters(), lr=options.learning_rate)
    order = random.Random(options.order_seed)
    last_loss = float("nan")
    for epoch in range(options.epochs):
        order.shuffle(encoded)
        total, batches = 0.0, 0
        for start in range(0, len(encoded), options.batch_size):
            loss = net.loss(*_batch(encoded[start : start + options.batch_size]))
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            total += loss.item()
            batches += 1
        last_loss = total / batches
        log.info("tool ranker epoch %d: loss %.4f", epoch + 1, last_loss)
    ranker = net.export(vectors)
    made = {
        **asdict(options),
        "corpus_version": CORPUS_VERSION,
        "examples": len(examples),
        "last_loss": round(last_loss, 5),
        "seconds": round(time.perf_counter() - started, 1),
    }
    return ranker, made


_Encoded = tuple[list[int], list[list[int]], list[float]]


def _encode(ex: RankedRequest, vectors: WordVectors) -> _Encoded:
    wanted = [1.0 if t.name in ex.wanted else 0.0 for t in ex.tools]  # type: ignore[attr-defined]
    request, *tools = vectors.token_ids(
        [request_text(ex.request), *(tool_text(t) for t in ex.tools)]  # type: ignore[arg-type]
    )
    return request, tools, wanted


def _padded(rows: Sequence[list[int]]) -> tuple[torch.Tensor, torch.Tensor]:
    width = max(1, max(len(r) for r in rows))
    ids = torch.zeros(len(rows), width, dtype=torch.long)
    mask = torch.zeros(len(rows), width, dtype=torch.bool)
    for i, row in enumerate(rows):
        ids[i, : len(row)] = torch.tensor(row, dtype=torch.long)
        mask[i, : len(row)] = True
    return ids, mask


def _batch(
    rows: Sequence[_Encoded],
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Requests [B, L] and their masks, tools [B, T, L'] and theirs, which tools are
    listed [B, T] and which are wanted [B, T]."""
    most = max(len(tools) for _, tools, _ in rows)
    flat: list[list[int]] = []
    listed = torch.zeros(len(rows), most, dtype=torch.bool)
    wanted = torch.zeros(len(rows), most)
    for i, (_, tools, want) in enumerate(rows):
        flat += tools + [[] for _ in range(most - len(tools))]
        listed[i, : len(tools)] = True
        wanted[i, : len(want)] = torch.tensor(want)
    requests, request_mask = _padded([r for r, _, _ in rows])
    tool_ids, tool_mask = _padded(flat)
    return (
        requests,
        request_mask,
        tool_ids.view(len(rows), most, -1),
        tool_mask.view(len(rows), most, -1),
        listed,
        wanted,
    )


class RankerNet(torch.nn.Module):
    """The ranker's maths in torch, for training (:class:`ToolRanker` is its numpy twin)."""

    def __init__(self, table: torch.Tensor) -> None:
        super().__init__()
        vocab, dim = table.shape
        self.register_buffer("table", table, persistent=False)
        self.projection = torch.nn.Parameter(torch.eye(dim))
        self.request_weights = torch.nn.Parameter(torch.zeros(vocab))
        self.tool_weights = torch.nn.Parameter(torch.zeros(vocab))
        self.scale = torch.nn.Parameter(torch.tensor(10.0))

    def embed(self, ids: torch.Tensor, mask: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
        score = weights[ids].masked_fill(~mask, -1e9)
        attention = torch.softmax(score, dim=-1) * mask  # a row of no tokens pools to 0
        mapped = (attention.unsqueeze(-1) * self.table[ids]).sum(-2) @ self.projection.T
        return mapped / mapped.norm(dim=-1, keepdim=True).clamp_min(1e-6)

    def forward(
        self,
        requests: torch.Tensor,
        request_mask: torch.Tensor,
        tools: torch.Tensor,
        tool_mask: torch.Tensor,
    ) -> torch.Tensor:
        said = self.embed(requests, request_mask, self.request_weights)  # [B, d]
        listed = self.embed(tools, tool_mask, self.tool_weights)  # [B, T, d]
        return self.scale * (listed @ said.unsqueeze(-1)).squeeze(-1)

    def loss(
        self,
        requests: torch.Tensor,
        request_mask: torch.Tensor,
        tools: torch.Tensor,
        tool_mask: torch.Tensor,
        listed: torch.Tensor,
        wanted: torch.Tensor,
    ) -> torch.Tensor:
        scores = self(requests, request_mask, tools, tool_mask).masked_fill(~listed, -1e9)
        log_p = torch.log_softmax(scores, dim=-1)
        return -torch.logsumexp(log_p.masked_fill(wanted == 0, -1e9), dim=-1).mean()

    def export(self, vectors: WordVectors) -> ToolRanker:
        with torch.no_grad():
            return ToolRanker(
                vectors=vectors,
                projection=self.projection.detach().numpy().copy(),
                request_weights=self.request_weights.detach().numpy().copy(),
                tool_weights=self.tool_weights.detach().numpy().copy(),
                scale=float(self.scale),
            )
