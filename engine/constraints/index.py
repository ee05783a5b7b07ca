"""Regex + tokenizer → :class:`TokenAutomaton`, through ``outlines_core.Index``.

The vocabulary handed to outlines holds every non-special token as its exact
bytes (byte-level BPE pieces decoded to bytes), so a token may end or start in
the middle of a UTF-8 character. Special tokens (mask, pad, role markers) never
appear inside an answer; the end token is added by us: from every final state
it leads to an absorbing ``done_state`` that loops on it.

:class:`ConstraintCompiler` owns an LRU cache keyed by (regex hash, tokenizer
fingerprint); the engine holds one. Nothing is cached at module level. Given an
:class:`~.automaton_store.AutomatonStore`, it also keeps automata on disk.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections import OrderedDict, deque
from collections.abc import Mapping
from dataclasses import dataclass, replace
from itertools import chain
from typing import Any, Protocol

import numpy as np
import torch
from outlines_core import Index, Vocabulary

from ..errors import SchemaError
from .automaton import TokenAutomaton, derived_tables
from .automaton_store import AutomatonStore
from .schema import CompiledSchema, compile_json_schema

#: Build the dense [S, V] table only up to this many entries (int32 each).
DENSE_TABLE_LIMIT = 4_000_000


class TokenSource(Protocol):
    """What the automaton needs from a tokenizer (``engine.tokenizer.Tokenizer`` fits)."""

    @property
    def vocab_size(self) -> int: ...

    @property
    def end_id(self) -> int | None: ...

    @property
    def special_ids(self) -> frozenset[int]: ...

    @property
    def fingerprint(self) -> str: ...

    def token_bytes(self, token_id: int) -> bytes: ...


@dataclass(frozen=True)
class AutomatonStats:
    """How big an automaton is and what it cost to build."""

    num_states: int
    num_transitions: int
    #: Seconds to index the regex (to read the automaton, when ``stored``).
    index_seconds: float
    schema_seconds: float = 0.0
    #: Served from the compiler's memory.
    cached: bool = False
    #: Read from the compiler's :class:`AutomatonStore` instead of indexed.
    stored: bool = False


@dataclass(frozen=True)
class CompiledConstraint:
    """A schema (or regex) compiled for one tokenizer."""

    regex: str
    automaton: TokenAutomaton
    stats: AutomatonStats
    schema: CompiledSchema | None = None


def token_vocabulary(tokenizer: TokenSource) -> dict[bytes, list[int]]:
    """Non-special tokens grouped by their exact bytes (tokens with no bytes are left out)."""
    by_bytes: dict[bytes, list[int]] = {}
    special = tokenizer.special_ids
    for tid in range(tokenizer.vocab_size):
        if tid in special or tid == tokenizer.end_id:
            continue
        try:
            data = tokenizer.token_bytes(tid)
        except KeyError:
            continue
        if data:
            by_bytes.setdefault(data, []).append(tid)
    return by_bytes


def build_token_automaton(
    regex: str, tokenizer: TokenSource, *, dense_limit: int = DENSE_TABLE_LIMIT
) -> tuple[TokenAutomaton, AutomatonStats]:
    """The token automaton of ``regex`` over ``tokenizer``'s vocabulary.

    Raises :class:`SchemaError` when outlines cannot index the regex (for example
    when the vocabulary cannot spell a character the regex requires).
    """
    end = tokenizer.end_id
    if end is None:
        raise ValueError("the tokenizer has no end token; the automaton needs one to finish")
    start = time.perf_counter()
    vocab = Vocabulary(end, token_vocabulary(tokenizer))
    try:
        index = Index(regex, vocab)
    except (ValueError, RuntimeError) as exc:
        raise SchemaError(f"cannot build the token index for this regex: {exc}") from exc
    automaton = _from_index(index, end, tokenizer.vocab_size, dense_limit)
    seconds = time.perf_counter() - start
    stats = AutomatonStats(
        num_states=automaton.num_states,
        num_transitions=int(automaton.tokens.numel()),
        index_seconds=seconds,
    )
    return automaton, stats


def _from_index(index: Index, end: int, vocab_size: int, dense_limit: int) -> TokenAutomaton:
    # outlines gives a dict of dicts (1.5 M transitions on an action schema): flatten
    # it once and do the rest in NumPy; per-transition Python work cost seconds.
    raw: Mapping[int, Mapping[int, int]] = index.get_transitions()
    sizes = [len(row) for row in raw.values()]
    src = np.repeat(np.fromiter(raw.keys(), dtype=np.int64, count=len(raw)), sizes)
    tok = np.fromiter(chain.from_iterable(raw.values()), dtype=np.int64, count=len(src))
    dst = np.fromiter(chain.from_iterable(r.values() for r in raw.values()), np.int64, len(src))
    keep = tok != end
    src, tok, dst = src[keep], tok[keep], dst[keep]
    order = np.argsort(src * vocab_size + tok, kind="stable")  # by state, then token (unique)
    src, tok, dst = src[order], tok[order], dst[order]
    dense = _breadth_first_ids(index.get_initial_state(), src, dst)
    done = len(dense)
    num_states = done + 1
    # Renumber, keeping only states reachable from the initial one.
    ids = np.full(int(max(src.max(initial=0), dst.max(initial=0))) + 1, -1, dtype=np.int64)
    ids[np.fromiter(dense.keys(), np.int64, done)] = np.fromiter(dense.values(), np.int64, done)
    reached = ids[src] >= 0
    src, tok, dst = ids[src[reached]], tok[reached], ids[dst[reached]]
    finals = [dense[q] for q in index.get_final_states() if q in dense]
    # From every final state the end token leads to DONE, which loops on it.
    src = np.concatenate([src, np.array([*finals, done], dtype=np.int64)])
    tok = np.concatenate([tok, np.full(len(finals) + 1, end, dtype=np.int64)])
    dst = np.concatenate([dst, np.full(len(finals) + 1, done, dtype=np.int64)])
    order = np.argsort(src * vocab_size + tok, kind="stable")
    src, tok, dst = src[order], tok[order], dst[order]
    final = torch.zeros(num_states, dtype=torch.bool)
    final[finals] = True
    final[done] = True
    offsets = torch.zeros(num_states + 1, dtype=torch.int64)
    offsets[1:] = torch.from_numpy(np.cumsum(np.bincount(src, minlength=num_states)))
    tokens = torch.from_numpy(tok.astype(np.int32))
    next_states = torch.from_numpy(dst.astype(np.int32))
    successors, table = derived_tables(
        torch.from_numpy(src), tokens, next_states, num_states, vocab_size, dense_limit
    )
    return TokenAutomaton(
        num_states=num_states,
        vocab_size=vocab_size,
        initial_state=0,
        done_state=done,
        end_token_id=end,
        final=final,
        offsets=offsets,
        tokens=tokens,
        next_states=next_states,
        successors=successors,
        live=_co_reachable(src, dst, done, num_states),
        table=table,
    )


def _breadth_first_ids(initial: int, src: np.ndarray, dst: np.ndarray) -> dict[int, int]:
    """Dense ids in breadth-first order from ``initial``, successors in token order
    (``src``/``dst`` sorted by state, then token): deterministic across runs."""
    starts = np.flatnonzero(np.diff(src, prepend=-1)) if src.size else src
    ends = [*starts[1:].tolist(), src.size]
    bounds = dict(zip(src[starts].tolist(), zip(starts.tolist(), ends, strict=True), strict=True))
    targets = dst.tolist()  # one conversion; a NumPy call per state cost more than the walk
    dense: dict[int, int] = {initial: 0}
    queue = deque([initial])
    while queue:
        q = queue.popleft()
        if q not in bounds:
            continue
        lo, hi = bounds[q]
        for r in targets[lo:hi]:
            if r not in dense:
                dense[r] = len(dense)
                queue.append(r)
    return dense


def _co_reachable(src: np.ndarray, dst: np.ndarray, target: int, n: int) -> torch.Tensor:
    """bool [n]: the states from which ``target`` can be reached."""
    pairs = np.unique(dst * n + src)  # one per (state, successor), not per token
    back: list[list[int]] = [[] for _ in range(n)]
    for r, q in zip((pairs // n).tolist(), (pairs % n).tolist(), strict=True):
        back[r].append(q)
    live = [False] * n
    live[target] = True
    queue = deque([target])
    while queue:
        for q in back[queue.popleft()]:
            if not live[q]:
                live[q] = True
                queue.append(q)
    return torch.tensor(live, dtype=torch.bool)


def schema_key(schema: Any, **options: Any) -> str:
    """A stable hash of a schema and its compile options."""
    text = json.dumps([schema, options], sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:24]


class ConstraintCompiler:
    """Compiles schemas/regexes into automata for tokenizers, with an LRU cache.

    ``compile_schema(schema, tokenizer)`` runs the schema front end and the token
    index once per (schema, options, tokenizer); repeats are cache hits.
    """

    def __init__(self, *, max_entries: int = 64, store: AutomatonStore | None = None) -> None:
        if max_entries < 1:
            raise ValueError("max_entries must be at least 1")
        self.max_entries = max_entries
        #: Automata on disk, shared across processes (None: memory only).
        self.store = store
        self._cache: OrderedDict[tuple[str, str], CompiledConstraint] = OrderedDict()
        self.hits = 0
        self.misses = 0

    def __len__(self) -> int:
        return len(self._cache)

    def clear(self) -> None:
        """Drop every cached automaton."""
        self._cache.clear()

    def _lookup(self, key: tuple[str, str]) -> CompiledConstraint | None:
        found = self._cache.get(key)
        if found is None:
            self.misses += 1
            return None
        self.hits += 1
        self._cache.move_to_end(key)
        s = found.stats
        return CompiledConstraint(
            regex=found.regex,
            automaton=found.automaton,
            schema=found.schema,
            stats=replace(s, cached=True),
        )

    def _store(self, key: tuple[str, str], value: CompiledConstraint) -> None:
        self._cache[key] = value
        self._cache.move_to_end(key)
        while len(self._cache) > self.max_entries:
            self._cache.popitem(last=False)

    def _automaton(
        self, regex: str, tokenizer: TokenSource
    ) -> tuple[TokenAutomaton, AutomatonStats]:
        """``regex``'s automaton: read from the store when it holds it, else built (and stored)."""
        if self.store is None:
            return build_token_automaton(regex, tokenizer)
        key = self.store.key(regex, tokenizer, DENSE_TABLE_LIMIT)
        start = time.perf_counter()
        found = self.store.load(key, DENSE_TABLE_LIMIT)
        if found is not None:
            seconds = time.perf_counter() - start
            stats = AutomatonStats(
                found.num_states, int(found.tokens.numel()), seconds, stored=True
            )
            return found, stats
        automaton, stats = build_token_automaton(regex, tokenizer)
        self.store.save(key, automaton)
        return automaton, stats

    def compile_regex(self, regex: str, tokenizer: TokenSource) -> CompiledConstraint:
        """The automaton of a raw regex."""
        key = ("re:" + hashlib.sha256(regex.encode()).hexdigest()[:24], tokenizer.fingerprint)
        found = self._lookup(key)
        if found is not None:
            return found
        automaton, stats = self._automaton(regex, tokenizer)
        compiled = CompiledConstraint(regex=regex, automaton=automaton, stats=stats)
        self._store(key, compiled)
        return compiled

    def compile_schema(
        self, schema: Any, tokenizer: TokenSource, **options: Any
    ) -> CompiledConstraint:
        """The automaton of a JSON Schema (``options`` go to :func:`compile_json_schema`)."""
        key = ("js:" + schema_key(schema, **options), tokenizer.fingerprint)
        found = self._lookup(key)
        if found is not None:
            return found
        compiled_schema = compile_json_schema(schema, **options)
        automaton, stats = self._automaton(compiled_schema.regex, tokenizer)
        compiled = CompiledConstraint(
            regex=compiled_schema.regex,
            automaton=automaton,
            schema=compiled_schema,
            stats=replace(stats, schema_seconds=compiled_schema.compile_seconds),
        )
        self._store(key, compiled)
        return compiled
