"""Fixtures for the kernel tests: random automata as ``SweepTables``."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch

from agentflow.kernels import SweepTables


def random_tables(num_states: int, vocab_size: int, density: float, seed: int) -> SweepTables:
    """A random DFA: each (state, token) has a transition with probability ``density``.

    A random quarter of the states (at least one) are accepting sinks of the
    unbounded future; ``live`` is computed by backward reachability to them.
    """
    g = torch.Generator().manual_seed(seed)
    present = torch.rand(num_states, vocab_size, generator=g) < density
    target = torch.randint(0, num_states, (num_states, vocab_size), generator=g)
    counts = present.sum(1)
    offsets = torch.zeros(num_states + 1, dtype=torch.int64)
    offsets[1:] = torch.cumsum(counts, 0)
    src, tok = torch.nonzero(present, as_tuple=True)  # row-major: sorted by state, then token
    nxt = target[src, tok]
    accepting = torch.rand(num_states, generator=g) < 0.25
    accepting[int(torch.randint(0, num_states, (1,), generator=g))] = True
    succ = torch.zeros(num_states, num_states, dtype=torch.bool)
    succ[src, nxt] = True
    live = accepting.clone()
    while True:
        grown = live | (succ & live.unsqueeze(0)).any(1)
        if torch.equal(grown, live):
            break
        live = grown
    return SweepTables.from_transitions(
        num_states, vocab_size, offsets, tok.to(torch.int32), nxt.to(torch.int32), live
    )


@pytest.fixture
def make_tables() -> Callable[[int, int, float, int], SweepTables]:
    """Factory of random ``SweepTables`` (states, vocab, density, seed)."""
    return random_tables


@pytest.fixture(scope="session")
def device() -> torch.device:
    """CUDA when present (real Triton), else the CPU (Triton under ``TRITON_INTERPRET=1``)."""
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


@pytest.fixture(scope="session")
def triton_ok(device: torch.device) -> None:
    """Skip unless the Triton path can run here (CUDA, or the interpreter on the CPU)."""
    from agentflow.kernels._backend import interpreting, triton_installed

    if not triton_installed():
        pytest.skip("triton is not installed")
    if device.type != "cuda" and not interpreting():
        pytest.skip("no CUDA device and TRITON_INTERPRET is not set (run via `make test`)")
