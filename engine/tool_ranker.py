"""Which listed tool a request asks for, learned: a small ranker on the word vectors.

:mod:`.tool_relevance` and :mod:`.tool_similarity` are fixed rules: the words a
request shares with a tool, and the cosine between their mean word vectors.
Neither knows which of a request's words matter ("do we know *x@y.io*?" asks for a
customer lookup: the e-mail says so, the words hardly do) nor which of a tool's.
The ranker learns both on the training corpus, over the same WordLlama vectors:

- a text is its tokens' vectors averaged with learned weights (a softmax over a
  per-token score: one table for requests, one for tools), then mapped by one
  learned ``dim × dim`` matrix shared by both sides and normalised;
- a tool's score is ``scale`` times the cosine between the request's vector and
  the tool's (its name's and description's words, :func:`.tool_similarity.tool_text`);
- the request is read whole, lower-cased, with its digits as ``0`` and quoted
  text as ``"title"``: the shape of a value ("INV-0000-0000", an ``@``) tells
  which tool takes it, the value itself does not.

Trained by :mod:`.training.tool_ranker_training` (``agentflow train-ranker``) on
the corpus's training split only, whose tool names, descriptions and phrasings
the held-out sets never use. The scores, less the listed tools' mean, join the
other priors' bonuses on the tool-name choice (:mod:`.tool_priors`); the model
still decides. docs/constraints.md ("Tool ranker") has the measurements.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .errors import CheckpointError
from .tool_relevance import QUOTED, DescribedTool, as_bonuses, check_weight
from .tool_similarity import WordVectors, read_tensors, tool_text

if TYPE_CHECKING:
    import numpy as np

#: Log-space bonus per unit of the ranker's centred score: ``EmbeddedModel``'s
#: default (``agentflow eval --tool-ranker`` is off unless given). 2 against 1: the
#: same in diffusion mode, better in AR and ``auto`` (docs/constraints.md, "Tool ranker").
DEFAULT_WEIGHT = 2.0
#: The packaged ranker's folder name under ``engine/weights``.
PACKAGED_RANKER = "agentflow-tool-ranker"
#: What ``config.json`` names as the format; bumped when the text or the maths change.
FORMAT = "agentflow-tool-ranker/1"
WEIGHTS_FILE = "ranker.safetensors"
CONFIG_FILE = "config.json"

_DIGIT = re.compile(r"[0-9]")


def request_text(request: str) -> str:
    """What the ranker reads of a request: lower-cased, quoted text as ``"title"``,
    every digit as ``0``."""
    return _DIGIT.sub("0", QUOTED.sub(' "title" ', request)).lower()


@dataclass(frozen=True, eq=False)
class ToolRanker:
    """A trained ranker (see the module's docstring) over ``vectors``."""

    vectors: WordVectors
    projection: np.ndarray  # [dim, dim]: applied as vector @ projection.T
    request_weights: np.ndarray  # [vocab]: each token's pooling score in a request
    tool_weights: np.ndarray  # [vocab]: ... in a tool's text
    scale: float

    def __post_init__(self) -> None:
        dim, vocab = self.vectors.dim, int(self.vectors.table.shape[0])
        if self.projection.shape != (dim, dim):
            raise ValueError(f"projection must be {dim} x {dim}, got {self.projection.shape}")
        for name in ("request_weights", "tool_weights"):
            if getattr(self, name).shape != (vocab,):
                raise ValueError(f"{name} must hold {vocab} values, one per token")

    @classmethod
    def load(
        cls, folder: str | Path | None = None, vectors: WordVectors | None = None
    ) -> ToolRanker:
        """The ranker saved in ``folder`` (the packaged one by default) over ``vectors``
        (the ``wordllama`` package's by default). :class:`CheckpointError` names a file
        that is missing or unreadable, or vectors of another shape than it was trained on."""
        import numpy as np

        folder = Path(folder) if folder is not None else packaged_folder()
        config = _read_config(folder / CONFIG_FILE)
        path = folder / WEIGHTS_FILE
        tensors = read_tensors(path, "tool ranker weights")
        missing = {"projection", "request_weights", "tool_weights", "scale"} - set(tensors)
        if missing:
            raise CheckpointError(f"tool ranker weights {path} lack {sorted(missing)}", path=path)
        vectors = vectors if vectors is not None else WordVectors.load()
        shape = [int(n) for n in vectors.table.shape]
        if config.get("vectors_shape") != shape:
            raise CheckpointError(
                f"tool ranker {folder} was trained on word vectors of shape "
                f"{config.get('vectors_shape')}, these are {shape}",
                path=folder / CONFIG_FILE,
            )
        return cls(
            vectors=vectors,
            projection=tensors["projection"].astype(np.float32),
            request_weights=tensors["request_weights"].astype(np.float32),
            tool_weights=tensors["tool_weights"].astype(np.float32),
            scale=float(tensors["scale"].reshape(-1)[0]),
        )

    def save(self, folder: str | Path, training: dict[str, Any] | None = None) -> Path:
        """Write ``config.json`` (with ``training``, what made it) and the weights
        (float16, the scale float32) to ``folder``; returns it."""
        import numpy as np
        from safetensors.numpy import save_file

        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        save_file(
            {
                "projection": self.projection.astype(np.float16),
                "request_weights": self.request_weights.astype(np.float16),
                "tool_weights": self.tool_weights.astype(np.float16),
                "scale": np.asarray([self.scale], dtype=np.float32),
            },
            str(folder / WEIGHTS_FILE),
        )
        config = {
            "format": FORMAT,
            "vectors": "wordllama l2_supercat_256",
            "vectors_shape": [int(n) for n in self.vectors.table.shape],
            "training": training or {},
        }
        (folder / CONFIG_FILE).write_text(json.dumps(config, indent=2) + "\n")
        return folder

    def embed(self, texts: Sequence[str], weights: np.ndarray) -> np.ndarray:
        """[len(texts), dim] unit vectors: each text's token vectors pooled with the
        softmax of ``weights`` over its tokens, then projected (zeros for no tokens)."""
        import numpy as np

        table = self.vectors.table
        out = np.zeros((len(texts), self.vectors.dim), dtype=np.float32)
        for i, ids in enumerate(self.vectors.token_ids(texts)):
            if not ids:
                continue
            score = weights[ids]
            attention = np.exp(score - score.max())
            pooled = (attention / attention.sum()) @ table[ids].astype(np.float32)
            mapped = pooled @ self.projection.T
            norm = float(np.linalg.norm(mapped))
            if norm > 0:
                out[i] = mapped / norm
        return out

    def scores(self, request: str, tools: Sequence[DescribedTool]) -> dict[str, float]:
        """Each listed tool's score for ``request``, less the listed tools' mean (all
        zeros when the request has no tokens)."""
        if not tools:
            return {}
        said = self.embed([request_text(request)], self.request_weights)[0]
        if not said.any():
            return dict.fromkeys((t.name for t in tools), 0.0)
        listed = self.embed([tool_text(t) for t in tools], self.tool_weights)
        raw = [self.scale * float(x) for x in listed @ said]
        mean = sum(raw) / len(raw)
        return {t.name: x - mean for t, x in zip(tools, raw, strict=True)}

    def bonuses(
        self, request: str, tools: Sequence[DescribedTool], weight: float = DEFAULT_WEIGHT
    ) -> dict[str, float]:
        """Log-space bonuses for ``ConstraintSession.prefer``: ``weight`` × :meth:`scores`,
        or an empty dict when fewer than two tools are listed or ``weight`` is 0."""
        weight = check_weight(weight, "tool ranker weight")
        if weight == 0 or len(tools) < 2:
            return {}
        return as_bonuses(self.scores(request, tools), weight)


def packaged_folder() -> Path:
    """Where the packaged ranker lives (``engine/weights/agentflow-tool-ranker``)."""
    return Path(__file__).parent / "weights" / PACKAGED_RANKER


def _read_config(path: Path) -> dict[str, Any]:
    if not path.is_file():
        raise CheckpointError(f"tool ranker config not found: {path}", path=path)
    try:
        config = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise CheckpointError(
            f"tool ranker config {path} is not readable JSON: {exc}", path=path
        ) from exc
    if not isinstance(config, dict) or config.get("format") != FORMAT:
        found = config.get("format") if isinstance(config, dict) else None
        raise CheckpointError(
            f"tool ranker config {path} has format {found!r}, expected {FORMAT!r}", path=path
        )
    return config
