"""Which tools a request is about, by meaning: static word vectors as a prior for tool choice.

:mod:`.tool_relevance` matches the request's words to a tool's words as
written; "turn off login bdoe" and ``deactivate_login`` share one, "tracking
info for ord_16469" and ``locate_shipment`` (*Carrier tracking for an order*)
share one in the description, "ifischer@example.com can't log in, please reset"
and ``recover_password`` none. Word vectors place *log in*, *reset* and
*password* near each other; a model of two million parameters trained on one
corpus has no such knowledge of English.

The vectors are WordLlama's (``l2_supercat_256``: the token-embedding table of a
large language model, 32,000 tokens × 256, trained for semantic similarity;
MIT licence), read from the files the ``wordllama`` wheel ships, with nothing
downloaded; its Python code is not used. A text's vector is the mean of its
tokens' vectors, normalised. A tool is read as the words of its name and
description, the request as :func:`~.tool_relevance.request_words` (no quoted
text, ids, hosts or e-mails), and each tool's bonus is ``weight`` times its
cosine similarity to the request, less the listed tools' mean: only the
differences between tools matter to a choice.

The bonuses join tool relevance's on the tool-name choice
(``ConstraintSession.prefer``); the model still decides. The same cosines tell a
request no tool serves (:mod:`.tool_priors`). docs/constraints.md ("Tool
similarity") has the measurements behind the default weight.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from .errors import CheckpointError
from .tool_relevance import DescribedTool, as_bonuses, check_weight, request_words, words

if TYPE_CHECKING:
    import numpy as np

#: Log-space bonus per unit of cosine similarity above the listed tools' mean:
#: ``EmbeddedModel``'s default (``agentflow eval --tool-similarity`` is off unless given).
DEFAULT_WEIGHT = 30.0

#: The files of the ``wordllama`` wheel that hold the vectors, under its package folder.
WORDLLAMA_FILES = (
    "weights/l2_supercat_256.safetensors",
    "tokenizers/l2_supercat_tokenizer_config.json",
)


@dataclass(frozen=True, eq=False)
class WordVectors:
    """A token-vector table and the tokenizer that splits text into its tokens."""

    table: np.ndarray  # [vocab, dim], as stored (float16 for WordLlama's)
    tokenizer: object  # tokenizers.Tokenizer

    @classmethod
    def load(
        cls, weights: str | Path | None = None, tokenizer: str | Path | None = None
    ) -> WordVectors:
        """The vectors in ``weights`` (a safetensors file holding one [vocab, dim]
        table) split by ``tokenizer`` (a ``tokenizer.json``); by default the files
        the ``wordllama`` package ships. :class:`CheckpointError` names a file that
        is missing or unreadable."""
        if weights is None or tokenizer is None:
            folder = wordllama_folder()
            weights = weights if weights is not None else folder / WORDLLAMA_FILES[0]
            tokenizer = tokenizer if tokenizer is not None else folder / WORDLLAMA_FILES[1]
        return cls(_read_table(Path(weights)), _read_tokenizer(Path(tokenizer)))

    @property
    def dim(self) -> int:
        """Components of a vector."""
        return int(self.table.shape[1])

    def token_ids(self, texts: Sequence[str]) -> list[list[int]]:
        """Each text's tokens that have a row in the table."""
        encodings = self.tokenizer.encode_batch(list(texts), add_special_tokens=False)  # type: ignore[attr-defined]
        vocab = self.table.shape[0]
        return [[t for t in encoding.ids if 0 <= t < vocab] for encoding in encodings]

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """[len(texts), dim] unit vectors, each the mean of its text's token vectors
        (zeros for a text with no tokens)."""
        import numpy as np

        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, ids in enumerate(self.token_ids(texts)):
            if not ids:
                continue
            mean = self.table[ids].astype(np.float32).mean(axis=0)
            norm = float(np.linalg.norm(mean))
            if norm > 0:
                out[i] = mean / norm
        return out


def wordllama_folder() -> Path:
    """The installed ``wordllama`` package's folder (not imported: only its files are read)."""
    spec = importlib.util.find_spec("wordllama")
    if spec is None or not spec.submodule_search_locations:
        raise CheckpointError(
            "tool similarity, the tool ranker and the answer bonus read the word vectors of "
            "the wordllama package, which is not installed: pip install wordllama, or turn "
            "them off with tool_similarity=0, tool_ranker=0 and answer_bonus=0"
        )
    return Path(next(iter(spec.submodule_search_locations)))


def tool_text(tool: DescribedTool) -> str:
    """What a tool is read as: the words of its name, then of its description."""
    return " ".join(words(tool.name) + words(tool.description or ""))


def cosines(
    request: str, tools: Sequence[DescribedTool], vectors: WordVectors
) -> list[float] | None:
    """Each tool's cosine similarity to ``request``'s own words (:func:`tool_text`
    against :func:`~.tool_relevance.request_words`); None when the request has none
    or no tool is listed."""
    said = " ".join(request_words(request))
    if not said or not tools:
        return None
    rows = vectors.embed([said, *(tool_text(t) for t in tools)])
    return [float(x) for x in rows[1:] @ rows[0]]


def centred(tools: Sequence[DescribedTool], found: list[float] | None) -> dict[str, float]:
    """Each tool's cosine (:func:`cosines`) less the listed tools' mean: all zeros
    when there are none."""
    if found is None:
        return dict.fromkeys((t.name for t in tools), 0.0)
    mean = sum(found) / len(found)
    return {t.name: c - mean for t, c in zip(tools, found, strict=True)}


def similarity(
    request: str, tools: Sequence[DescribedTool], vectors: WordVectors
) -> dict[str, float]:
    """Each tool's cosine similarity to ``request`` less the listed tools' mean (all
    zeros when the request has no words of its own)."""
    return centred(tools, cosines(request, tools, vectors))


def similarity_bonuses(
    request: str,
    tools: Iterable[DescribedTool],
    vectors: WordVectors,
    weight: float = DEFAULT_WEIGHT,
) -> dict[str, float]:
    """Log-space bonuses for ``ConstraintSession.prefer``: ``weight`` × :func:`similarity`
    for every listed tool, or an empty dict when fewer than two tools are listed,
    ``weight`` is 0 or the request has no words of its own."""
    weight = check_weight(weight, "tool similarity weight")
    listed = list(tools)
    if weight == 0 or len(listed) < 2:
        return {}
    return as_bonuses(similarity(request, listed, vectors), weight)


def read_tensors(path: Path, what: str) -> dict[str, np.ndarray]:
    """The numpy tensors of the safetensors file ``path``; :class:`CheckpointError`
    names ``what`` and the file when it is missing or unreadable."""
    from safetensors import SafetensorError
    from safetensors.numpy import load_file

    if not path.is_file():
        raise CheckpointError(f"{what} not found: {path}", path=path)
    try:
        return load_file(str(path))
    except (SafetensorError, OSError, ValueError) as exc:
        raise CheckpointError(
            f"{what} {path} is not readable safetensors: {exc}", path=path
        ) from exc


def _read_table(path: Path) -> np.ndarray:
    import numpy as np

    tensors = read_tensors(path, "word vectors file")
    tables = [t for t in tensors.values() if t.ndim == 2]
    if len(tables) != 1:
        raise CheckpointError(
            f"word vectors file {path} must hold one [vocab, dim] table, found {len(tables)}",
            path=path,
        )
    table = tables[0]
    if not np.issubdtype(table.dtype, np.floating):
        raise CheckpointError(
            f"word vectors file {path} holds {table.dtype}, not floats", path=path
        )
    return table  # cast per looked-up row: casting 32,000 x 256 up front takes 0.3 s


def _read_tokenizer(path: Path) -> object:
    from tokenizers import Tokenizer

    if not path.is_file():
        raise CheckpointError(f"word vectors tokenizer not found: {path}", path=path)
    try:
        return Tokenizer.from_file(str(path))
    except Exception as exc:  # tokenizers raises a bare Exception on a bad file
        raise CheckpointError(
            f"word vectors tokenizer {path} is not readable: {exc}", path=path
        ) from exc
