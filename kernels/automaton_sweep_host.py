"""Host-side (NumPy) sweeps of one block row, updated incrementally as positions are committed.

The constrained denoising step works on one row of ``L`` positions at a time:
a handful of set operations per position, far too little work for a kernel
launch and a device round trip. :class:`BlockSweep` keeps the forward sets of a
row (the semantics of :func:`.automaton_sweep`) and its backward sets trimmed to
the forward ones, so each position costs work in proportion to the states
reachable there (a few dozen in practice, out of thousands). When positions that
were masked become fixed, only what can change is recomputed: the forward sets
right of the leftmost change, until a recomputed set equals the one it replaces
past the last change, and the backward sets left of there, with the same early
stop left of the first change.

Backward sets are often *levels*: with ``dist`` the fewest tokens from a state
to acceptance, ``level(m) = {q live : dist[q] <= m}``. The exit set is a level
(``m = S`` for an unbounded future, the token budget left otherwise), and the
predecessors of a level through a masked position are exactly the next level,
so runs of masks at the right of a block cost one lookup per reachable state.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import torch
from torch import Tensor

from .sweep_tables import SweepTables


def _np(t: object) -> np.ndarray:
    return t.detach().cpu().numpy().astype(np.int64)  # type: ignore[attr-defined]


def _distances(num_states: int, src: np.ndarray, dst: np.ndarray, target: int) -> np.ndarray:
    """int64 [S]: fewest steps from each state to ``target`` (``S + 1`` when unreachable)."""
    unreachable = num_states + 1
    dist = np.full(num_states, unreachable, dtype=np.int64)
    dist[target] = 0
    frontier = np.zeros(num_states, dtype=bool)
    frontier[target] = True
    for d in range(1, num_states + 1):
        reach = np.zeros(num_states, dtype=bool)
        reach[src[frontier[dst]]] = True
        reach &= dist == unreachable
        if not reach.any():
            break
        dist[reach] = d
        frontier = reach
    return dist


#: Up to this many states, a mask step runs over Python sets (fewer NumPy calls).
SMALL_SET = 64
#: Entries of :attr:`HostTables.mask_memo` (each at most S int64s).
MASK_MEMO_SIZE = 1024


def _ranges(offsets: np.ndarray, states: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(entry ids, owning state) of the CSR lists of ``states``, laid end to end."""
    starts = offsets[states]
    counts = offsets[states + 1] - starts
    total = int(counts.sum())
    edges = np.repeat(starts - np.cumsum(counts) + counts, counts) + np.arange(total)
    return edges, np.repeat(states, counts)


@dataclass(frozen=True)
class HostTables:
    """NumPy copies of an automaton's tables, with the distance of each state to acceptance."""

    num_states: int
    vocab_size: int
    offsets: np.ndarray  # int64 [S + 1], state-major CSR, sorted by token within a state
    tokens: np.ndarray  # int64 [E]
    next_states: np.ndarray  # int64 [E]
    succ_offsets: np.ndarray  # int64 [S + 1]: CSR of the unique successor pairs
    succ_dst: np.ndarray  # int64 [P]
    live: np.ndarray  # bool [S]
    #: int64 [S]: fewest tokens to ``done_state`` (``S + 1`` when it cannot be reached).
    dist: np.ndarray
    tok_offsets: np.ndarray  # int64 [V + 1], token-major CSR of the transitions
    tok_src: np.ndarray  # int64 [E]
    tok_dst: np.ndarray  # int64 [E]
    #: Successors of each state as Python tuples: small sets step faster in Python than in NumPy.
    succ: tuple[tuple[int, ...], ...]
    #: δ looked up so far, keyed ``state * V + token`` (blocks ask the same ones step after step).
    memo: dict[int, int] = field(default_factory=dict, repr=False, compare=False)
    #: Successor sets of large state sets (a mask step), keyed by the set's bytes. Rows
    #: re-sweep the same runs of masks step after step and request after request: on the
    #: tool-call benchmark four calls in five repeat an earlier set.
    mask_memo: dict[bytes, np.ndarray] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_sweep_tables(cls, tables: SweepTables, done_state: int) -> HostTables:
        """Copy ``tables`` to host arrays and compute the distances to ``done_state``."""
        offsets = _np(tables.offsets)
        s, v = tables.num_states, tables.vocab_size
        tokens, next_states = _np(tables.tokens), _np(tables.next_states)
        succ_src, succ_dst = _np(tables.succ_src), _np(tables.succ_dst)  # sorted by source
        succ_offsets = np.searchsorted(succ_src, np.arange(s + 1)).astype(np.int64)
        words = tables.exit_bits.detach().cpu().numpy().astype("<u4").view(np.uint8)
        live = np.unpackbits(words, bitorder="little")[:s].astype(bool)
        return cls(
            num_states=s,
            vocab_size=v,
            offsets=offsets,
            tokens=tokens,
            next_states=next_states,
            succ_offsets=succ_offsets,
            succ_dst=succ_dst,
            live=live,
            dist=_distances(s, succ_src, succ_dst, done_state),
            tok_offsets=_np(tables.tok_offsets),
            tok_src=_np(tables.tok_src),
            tok_dst=_np(tables.tok_dst),
            succ=tuple(
                tuple(succ_dst[succ_offsets[q] : succ_offsets[q + 1]].tolist()) for q in range(s)
            ),
        )

    def level(self, m: int) -> np.ndarray:
        """bool [S]: live states that reach acceptance within ``m`` tokens."""
        return self.live & (self.dist <= m)

    def step(self, state: int, token: int) -> int:
        """δ(state, token), or -1 when the token is not allowed there."""
        lo, hi = int(self.offsets[state]), int(self.offsets[state + 1])
        i = lo + int(np.searchsorted(self.tokens[lo:hi], token))
        if i < hi and int(self.tokens[i]) == token:
            return int(self.next_states[i])
        return -1

    def cached_step(self, state: int, token: int) -> int:
        """:meth:`step` through :attr:`memo`."""
        key = state * self.vocab_size + token
        found = self.memo.get(key)
        if found is None:
            found = self.memo[key] = self.step(state, token)
        return found

    def dense(self, states: np.ndarray) -> np.ndarray:
        """bool [S] membership of ``states``."""
        out = np.zeros(self.num_states, dtype=bool)
        out[states] = True
        return out

    def _pairs(self, token: int) -> tuple[np.ndarray, np.ndarray]:
        lo, hi = int(self.tok_offsets[token]), int(self.tok_offsets[token + 1])
        return self.tok_src[lo:hi], self.tok_dst[lo:hi]

    # Fixed tokens on many states go through the token's (source, destination) pairs,
    # a few hundred on average, rather than one search per state.

    def forward(self, states: np.ndarray, token: int | None) -> np.ndarray:
        """Sorted states after one position from ``states`` (``token=None``: a mask, any token)."""
        if token is None:
            key = states.tobytes()
            found = self.mask_memo.get(key)
            if found is None:
                edges, _ = _ranges(self.succ_offsets, states)
                out = np.zeros(self.num_states, dtype=bool)
                out[self.succ_dst[edges]] = True
                found = np.flatnonzero(out)
                found.setflags(write=False)
                if len(self.mask_memo) >= MASK_MEMO_SIZE:
                    del self.mask_memo[next(iter(self.mask_memo))]  # the oldest entry
                self.mask_memo[key] = found
            return found
        out = np.zeros(self.num_states, dtype=bool)
        src, dst = self._pairs(token)
        out[dst[self.dense(states)[src]]] = True
        return np.flatnonzero(out)

    def backward(self, states: np.ndarray, token: int | None, after: np.ndarray) -> np.ndarray:
        """Sorted ``states`` from which one position leads into ``after`` (bool [S])."""
        out = np.zeros(self.num_states, dtype=bool)
        if token is None:
            edges, owner = _ranges(self.succ_offsets, states)
            out[owner[after[self.succ_dst[edges]]]] = True
            return states[out[states]]
        src, dst = self._pairs(token)
        out[src[self.dense(states)[src] & after[dst]]] = True
        return np.flatnonzero(out)

    def allows(self, before: np.ndarray, after: np.ndarray, token: int) -> bool:
        """Does ``token`` lead from a state of ``before`` into ``after`` (both bool [S])?"""
        if not 0 <= token < self.vocab_size:
            return False
        src, dst = self._pairs(token)
        return bool((before[src] & after[dst]).any())

    def allowed(self, states: np.ndarray, after: np.ndarray) -> np.ndarray:
        """bool [V]: the tokens leading from one of ``states`` into ``after``."""
        edges, _ = _ranges(self.offsets, states)
        edges = edges[after[self.next_states[edges]]]
        out = np.zeros(self.vocab_size, dtype=bool)
        out[self.tokens[edges]] = True
        return out


class BlockSweep:
    """Forward/backward state sets of one block row, kept current by :meth:`sync`.

    ``entry`` is the state before the row; the states allowed after it are
    ``tables.level(exit_level)``. ``forward[i]`` (sorted state ids) is the set of
    :func:`.automaton_sweep`; ``backward[i]`` (bool [S]) is its backward set
    *trimmed* to ``forward[i]``: the states reachable at ``i`` from which the rest
    of the row can be completed. Every query (feasibility, allowed tokens, forced
    runs) only asks about reachable states, so the trimmed sets answer it exactly,
    and each position costs work in proportion to the few states reachable there.
    """

    def __init__(self, tables: HostTables, entry: int, exit_level: int) -> None:
        self.tables = tables
        self.entry = entry
        self.exit_level = min(exit_level, tables.num_states)
        self.tokens: list[int] = []
        self.masked: list[bool] = []
        self.forward: list[np.ndarray] = []
        self.backward: list[np.ndarray] = []
        self._viable: list[np.ndarray] = []
        self._viable_sets: list[frozenset[int] | None] = []
        self._levels: list[int | None] = []
        #: How many full sweeps and incremental updates this row needed (for stats and tests).
        self.full_sweeps = 0
        self.updates = 0

    def sync(self, tokens: Sequence[int], masked: Sequence[bool]) -> None:
        """Bring the sets up to date with the row; incremental when masks only became fixed."""
        tokens, masked = list(tokens), list(masked)
        if len(tokens) != len(self.tokens) or not self.forward:
            self._full(tokens, masked)
            return
        changed = [
            i
            for i, (m, was) in enumerate(zip(masked, self.masked, strict=True))
            if m != was or (not m and tokens[i] != self.tokens[i])
        ]
        if not changed:
            return
        if any(masked[i] or not self.masked[i] for i in changed):
            self._full(tokens, masked)  # a mask reappeared or a fixed token changed
            return
        self.tokens, self.masked = tokens, masked
        self._update(changed[0], changed[-1])

    def _token(self, i: int) -> int | None:
        return None if self.masked[i] else self.tokens[i]

    def _full(self, tokens: list[int], masked: list[bool]) -> None:
        self.tokens, self.masked = tokens, masked
        length = len(tokens)
        self.forward = [np.array([self.entry], dtype=np.int64)]
        for i in range(length):
            self.forward.append(self._step(i))
        self.backward = [np.empty(0, dtype=bool)] * (length + 1)
        self._viable = [np.empty(0, dtype=np.int64)] * (length + 1)
        self._viable_sets = [None] * (length + 1)
        self._levels = [None] * (length + 1)
        self._back(length)
        for i in range(length - 1, -1, -1):
            self._back(i)
        self.full_sweeps += 1

    def _back(self, i: int) -> None:
        """Recompute ``backward[i]`` from ``forward[i]`` and ``backward[i + 1]``."""
        t = self.tables
        states = self.forward[i]
        if i == len(self.tokens):
            level: int | None = self.exit_level
        else:
            above = self._levels[i + 1]
            level = min(above + 1, t.num_states) if self.masked[i] and above is not None else None
        self._levels[i] = level
        if level is None and states.size <= SMALL_SET:
            after, token = self._viable_set(i + 1), self._token(i)
            if token is None:
                succ = t.succ
                keep = [q for q in states.tolist() if not after.isdisjoint(succ[q])]
            else:
                step = t.cached_step
                keep = [q for q in states.tolist() if step(q, token) in after]
            viable = np.array(keep, dtype=np.int64)
        elif level is None:
            viable = t.backward(states, self._token(i), self.backward[i + 1])
        else:  # through masks, a level's predecessors are the next level
            viable = states[t.live[states] & (t.dist[states] <= level)]
        out = np.zeros(t.num_states, dtype=bool)
        out[viable] = True
        self._viable[i], self.backward[i] = viable, out
        self._viable_sets[i] = None

    def _viable_set(self, i: int) -> frozenset[int]:
        found = self._viable_sets[i]
        if found is None:
            found = self._viable_sets[i] = frozenset(self._viable[i].tolist())
        return found

    def _step(self, i: int) -> np.ndarray:
        """``forward[i + 1]`` from ``forward[i]``."""
        states, token = self.forward[i], self._token(i)
        if states.size > SMALL_SET:
            return self.tables.forward(states, token)
        out: set[int] = set()
        if token is None:
            succ = self.tables.succ
            for q in states.tolist():
                out.update(succ[q])
        else:
            step = self.tables.cached_step
            out = {step(q, token) for q in states.tolist()}
            out.discard(-1)
        return np.array(sorted(out), dtype=np.int64)

    def _update(self, lo: int, hi: int) -> None:
        """Positions ``lo .. hi`` (some of them) went from masked to fixed."""
        last = hi  # the rightmost position whose forward set may have changed
        for i in range(lo, len(self.tokens)):
            new = self._step(i)
            if i > hi and np.array_equal(new, self.forward[i + 1]):
                break
            self.forward[i + 1] = new
            last = i + 1
        for i in range(last, -1, -1):
            if i > hi:
                self._trim(i)
                continue
            old = self._viable[i]
            self._back(i)
            if i < lo and np.array_equal(old, self._viable[i]):
                break
        self.updates += 1

    def _trim(self, i: int) -> None:
        """Re-trim ``backward[i]`` to a ``forward[i]`` that shrank, right of every change.

        The untrimmed backward set at ``i`` depends only on positions ``i`` onwards,
        which did not change, and the new forward set is a subset of the old one
        (masks only became fixed), so the new trimmed set is the old one ∩ the new
        forward set: no step through the automaton is needed.
        """
        old = self._viable[i]
        states = self.forward[i]
        viable = states[self.backward[i][states]]
        if viable.size == old.size:
            return
        out = np.zeros(self.tables.num_states, dtype=bool)
        out[viable] = True
        self._viable[i], self.backward[i] = viable, out
        self._viable_sets[i] = None

    # -- queries --

    @property
    def length(self) -> int:
        """Positions in the row."""
        return len(self.tokens)

    def feasible(self) -> bool:
        """Some completion of the row's masks is accepted."""
        return self._viable[0].size > 0

    def viable(self, i: int) -> np.ndarray:
        """Sorted states reachable at ``i`` from which the row can still be completed."""
        return self._viable[i]

    def allows(self, pos: int, token: int) -> bool:
        """Is ``token`` allowed at masked position ``pos``?"""
        states = self._viable[pos]
        if states.size > SMALL_SET:
            return self.tables.allows(self.backward[pos], self.backward[pos + 1], token)
        if not 0 <= token < self.tables.vocab_size:
            return False
        after, step = self._viable_set(pos + 1), self.tables.cached_step
        return any(step(q, token) in after for q in states.tolist())

    def allowed(self, pos: int) -> np.ndarray:
        """bool [V]: the tokens allowed at masked position ``pos``."""
        return self.tables.allowed(self.viable(pos), self.backward[pos + 1])


def pack_rows(bits: np.ndarray) -> Tensor:
    """bool [N, n] → int32 [N, ceil(n/32)] in the layout of :func:`agentflow.kernels.pack_bits`."""
    n = bits.shape[1]
    padded = np.zeros((bits.shape[0], (n + 31) // 32 * 32), dtype=bool)
    padded[:, :n] = bits
    words = np.packbits(padded, axis=1, bitorder="little").view("<i4")
    return torch.from_numpy(words.astype(np.int32))
