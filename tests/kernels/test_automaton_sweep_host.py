"""Host sweeps (BlockSweep): against the reference sweep, and incremental updates against full re-sweeps."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from agentflow.kernels import (
    SweepTables,
    allowed_mask_reference,
    automaton_sweep_reference,
    pack_bits,
    unpack_bits,
)
from agentflow.kernels import automaton_sweep_host as host_sweep
from agentflow.kernels.automaton_sweep_host import BlockSweep, HostTables, pack_rows

END = 0  # the end token of the test automata


def done_automaton(num_states: int, vocab: int, density: float, seed: int) -> HostTables:
    """A random DFA shaped like the engine's: state S-1 is DONE (loops on the end token 0),
    a random third of the other states are final (end token into DONE)."""
    g = torch.Generator().manual_seed(seed)
    present = torch.rand(num_states, vocab, generator=g) < density
    target = torch.randint(0, num_states - 1, (num_states, vocab), generator=g)
    done = num_states - 1
    final = torch.rand(num_states, generator=g) < 0.33
    present[:, END] = final
    target[:, END] = done
    present[done] = False
    present[done, END] = True
    src, tok = torch.nonzero(present, as_tuple=True)
    nxt = target[src, tok]
    offsets = torch.zeros(num_states + 1, dtype=torch.int64)
    offsets[1:] = torch.cumsum(present.sum(1), 0)
    succ = torch.zeros(num_states, num_states, dtype=torch.bool)
    succ[src, nxt] = True
    live = torch.zeros(num_states, dtype=torch.bool)
    live[done] = True
    while True:
        grown = live | (succ & live.unsqueeze(0)).any(1)
        if torch.equal(grown, live):
            break
        live = grown
    tables = SweepTables.from_transitions(
        num_states, vocab, offsets, tok.to(torch.int32), nxt.to(torch.int32), live
    )
    return HostTables.from_sweep_tables(tables, done)


def _reference(
    host: HostTables,
    tables: SweepTables,
    tokens: list[int],
    masked: list[bool],
    entry: int,
    level: int,
) -> tuple[torch.Tensor, torch.Tensor]:
    exit_bits = pack_bits(torch.from_numpy(host.level(level)).unsqueeze(0))
    fwd, bwd = automaton_sweep_reference(
        torch.tensor([tokens]), torch.tensor([masked]), torch.tensor([entry]), tables, exit_bits
    )
    s = host.num_states
    return unpack_bits(fwd[0], s), unpack_bits(bwd[0], s)


def _tables(seed: int) -> tuple[HostTables, SweepTables]:
    host = done_automaton(12, 9, 0.3, seed)
    s = host.num_states
    offsets = torch.from_numpy(host.offsets)
    tables = SweepTables.from_transitions(
        s,
        host.vocab_size,
        offsets,
        torch.from_numpy(host.tokens).to(torch.int32),
        torch.from_numpy(host.next_states).to(torch.int32),
        torch.from_numpy(host.live),
    )
    return host, tables


def _same_sets(a: BlockSweep, b: BlockSweep) -> None:
    assert a.length == b.length
    for i in range(a.length + 1):
        assert a.forward[i].tolist() == b.forward[i].tolist(), f"forward[{i}]"
        assert a.viable(i).tolist() == b.viable(i).tolist(), f"viable[{i}]"
        assert (a.backward[i] == b.backward[i]).all(), f"backward[{i}]"


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("small_set", [0, 64])
def test_sets_match_the_reference_sweep(
    seed: int, small_set: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(host_sweep, "SMALL_SET", small_set)
    host, tables = _tables(seed)
    g = torch.Generator().manual_seed(100 + seed)
    for _ in range(15):
        length = int(torch.randint(1, 8, (1,), generator=g))
        tokens = torch.randint(0, host.vocab_size, (length,), generator=g).tolist()
        masked = (torch.rand(length, generator=g) < 0.6).tolist()
        entry = int(torch.randint(0, host.num_states, (1,), generator=g))
        level = int(torch.randint(0, 6, (1,), generator=g)) if seed % 2 else host.num_states
        row = BlockSweep(host, entry, level)
        row.sync(tokens, masked)
        fwd, bwd = _reference(host, tables, tokens, masked, entry, level)
        for i in range(length + 1):
            assert row.forward[i].tolist() == torch.nonzero(fwd[i]).flatten().tolist()
            trimmed = fwd[i] & bwd[i]  # backward sets are kept trimmed to the forward ones
            assert row.viable(i).tolist() == torch.nonzero(trimmed).flatten().tolist()
        assert row.feasible() == bool((fwd[-1] & bwd[-1]).any())
        positions = [i for i in range(length) if masked[i]]
        if positions and row.feasible():
            idx = torch.tensor(positions)
            expect = unpack_bits(
                allowed_mask_reference(pack_bits(fwd[idx]), pack_bits(bwd[idx + 1]), tables),
                host.vocab_size,
            )
            for k, pos in enumerate(positions):
                got = row.allowed(pos)
                assert got.tolist() == expect[k].tolist()
                assert [row.allows(pos, t) for t in range(host.vocab_size)] == got.tolist()


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("small_set", [0, 64])  # mask steps in NumPy only / in Python sets
def test_incremental_commits_match_a_full_resweep(
    seed: int, small_set: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Commit random positions of random rows (allowed tokens, and sometimes forbidden ones)
    one or several at a time; after every sync the sets equal a fresh full sweep's."""
    monkeypatch.setattr(host_sweep, "SMALL_SET", small_set)
    host = done_automaton(30, 14, 0.25, seed)
    g = torch.Generator().manual_seed(seed)
    for _ in range(6):
        length = int(torch.randint(4, 14, (1,), generator=g))
        tokens = torch.randint(0, host.vocab_size, (length,), generator=g).tolist()
        masked = (torch.rand(length, generator=g) < 0.8).tolist()
        entry = int(torch.randint(0, host.num_states, (1,), generator=g))
        level = int(torch.randint(0, 12, (1,), generator=g)) if seed % 2 else host.num_states
        row = BlockSweep(host, entry, level)
        row.sync(tokens, masked)
        while any(masked):
            open_ = [i for i in range(length) if masked[i]]
            picks = torch.randperm(len(open_), generator=g)[
                : int(torch.randint(1, 3, (1,), generator=g))
            ]
            for k in picks.tolist():
                pos = open_[k]
                allowed = row.allowed(pos).nonzero()[0].tolist() if row.feasible() else []
                forbid = float(torch.rand(1, generator=g)) < 0.15 or not allowed
                pool = range(host.vocab_size) if forbid else allowed
                tokens[pos] = list(pool)[int(torch.randint(0, len(pool), (1,), generator=g))]
                masked[pos] = False
            row.sync(tokens, masked)
            fresh = BlockSweep(host, entry, level)
            fresh.sync(tokens, masked)
            _same_sets(row, fresh)
        assert row.full_sweeps == 1  # every later change was incremental


def test_reappearing_masks_and_changed_tokens_resweep_fully() -> None:
    host = done_automaton(20, 10, 0.3, 3)
    row = BlockSweep(host, 0, host.num_states)
    tokens, masked = [1, 2, 3, 4, 5], [True, False, True, True, False]
    row.sync(tokens, masked)
    for tokens, masked in (
        ([1, 2, 3, 4, 5], [True, True, True, True, False]),  # a mask reappears
        ([1, 2, 3, 4, 6], [True, True, True, True, False]),  # a fixed token changes
        ([1, 2, 3, 4, 6, 6], [True, True, True, True, False, True]),  # another length
    ):
        row.sync(tokens, masked)
        fresh = BlockSweep(host, 0, host.num_states)
        fresh.sync(tokens, masked)
        _same_sets(row, fresh)
    assert row.full_sweeps == 4 and row.updates == 0


def test_mask_runs_from_a_level_are_levels() -> None:
    """Through masks, the predecessors of {dist <= m} are {dist <= m + 1} (on live states)."""
    host = done_automaton(40, 12, 0.15, 5)
    for m in range(0, 8):
        level = host.level(m)
        pred = torch.zeros(host.num_states, dtype=torch.bool)
        for q in range(host.num_states):
            lo, hi = int(host.offsets[q]), int(host.offsets[q + 1])
            pred[q] = bool(level[host.next_states[lo:hi]].any())
        assert pred.tolist() == host.level(m + 1).tolist()


def test_cached_steps_match_the_transition_lists() -> None:
    host = done_automaton(25, 11, 0.3, 9)
    table = {
        (int(q), int(t)): int(r)
        for q, t, r in zip(
            np.repeat(np.arange(host.num_states), np.diff(host.offsets)),
            host.tokens,
            host.next_states,
            strict=True,
        )
    }
    for _ in range(2):  # the second pass reads the memo
        for q in range(host.num_states):
            for t in range(host.vocab_size):
                assert host.cached_step(q, t) == table.get((q, t), -1)


def test_remembered_mask_steps_match_fresh_ones_and_stay_bounded(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(host_sweep, "MASK_MEMO_SIZE", 8)
    host = done_automaton(60, 9, 0.2, 4)
    rng = np.random.default_rng(0)
    sets = [np.unique(rng.integers(0, host.num_states, size=n)) for n in range(1, 30)]

    def fresh(states: np.ndarray) -> np.ndarray:
        out = np.zeros(host.num_states, dtype=bool)
        for q in states:
            out[host.next_states[host.offsets[q] : host.offsets[q + 1]]] = True
        return np.flatnonzero(out)

    for _ in range(2):  # the second pass finds some in the memo, evicted others
        for states in sets:
            got = host.forward(states, None)
            assert got.tolist() == fresh(states).tolist()
            assert not got.flags.writeable  # a shared answer cannot be edited by a caller
    assert len(host.mask_memo) == 8


def test_pack_rows_matches_pack_bits() -> None:
    g = torch.Generator().manual_seed(0)
    for n in (1, 31, 32, 33, 100):
        bits = torch.rand(3, n, generator=g) < 0.5
        assert torch.equal(pack_rows(bits.numpy()), pack_bits(bits))
