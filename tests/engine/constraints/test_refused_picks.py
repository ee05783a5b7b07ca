"""ByteNeighbours: the allowed token nearest to a refused one, by shared bytes, then logits."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from agentflow.engine.constraints.refused_picks import ByteNeighbours

VOCAB = [
    *(b"", b'"', b'"}}]}', b'","', b"}", b"de", b"deny", b"deactivate", b"x", b"dea"),
    *(b'":', b'":"', b'":"#', b'":["'),
]
ID = {data: tid for tid, data in enumerate(VOCAB)}


@pytest.fixture
def neighbours() -> ByteNeighbours:
    return ByteNeighbours(VOCAB)


def _allowed(*tokens: bytes) -> np.ndarray:
    out = np.zeros(len(VOCAB), dtype=bool)
    out[[ID[t] for t in tokens]] = True
    return out


def test_longest_shared_prefix_wins_then_the_logits(neighbours: ByteNeighbours) -> None:
    logits = torch.zeros(len(VOCAB))
    logits[ID[b"de"]] = 3.0
    # "dea" shares three bytes with "deactivate": it wins over the likelier "de".
    assert (
        neighbours.closest(ID[b"deactivate"], _allowed(b"de", b"dea", b"x"), logits) == ID[b"dea"]
    )
    # "de" and "deny" share two bytes each: the logits decide.
    logits[ID[b"deny"]] = 5.0
    assert neighbours.closest(ID[b"deactivate"], _allowed(b"de", b"deny"), logits) == ID[b"deny"]


def test_a_refused_delimiter_keeps_its_meaning(neighbours: ByteNeighbours) -> None:
    # The model meant '","' (close the string, next key) but no key is left: both
    # '"' and '"}}]}' close the string; the likelier one is taken, never '}'.
    logits = torch.zeros(len(VOCAB))
    logits[ID[b"}"]] = 9.0
    logits[ID[b'"}}]}']] = 4.0
    logits[ID[b'"']] = 2.0
    allowed = _allowed(b'"', b'"}}]}', b"}")
    assert neighbours.closest(ID[b'","'], allowed, logits) == ID[b'"}}]}']


def test_no_shared_first_byte_or_a_special_token_gives_none(neighbours: ByteNeighbours) -> None:
    logits = torch.zeros(len(VOCAB))
    assert neighbours.closest(ID[b"x"], _allowed(b"de", b'"'), logits) is None
    assert neighbours.closest(0, _allowed(b"de"), logits) is None  # no bytes: special
    assert neighbours.closest(ID[b"de"], np.zeros(len(VOCAB), dtype=bool), logits) is None
    # an allowed mask narrower than the vocabulary: missing ids are not allowed
    assert neighbours.closest(ID[b"deny"], _allowed(b"de")[:6], logits) == ID[b"de"]


def test_a_held_back_token_gives_way_to_a_likelier_extension(neighbours: ByteNeighbours) -> None:
    logits = torch.zeros(len(VOCAB))
    logits[ID[b'":["']] = 2.0
    logits[ID[b'":"#']] = 5.0
    allowed = _allowed(b'":', b'":"', b'":"#', b'":["', b"x")
    assert neighbours.likeliest_extension(ID[b'":'], allowed, logits) == ID[b'":"#']
    # an extension the caller refuses (it writes a value's content) is passed over
    structural = neighbours.likeliest_extension(
        ID[b'":'], allowed, logits, keep=lambda tid: tid != ID[b'":"#']
    )
    assert structural == ID[b'":["']
    # a tie keeps the held-back token; no allowed extension keeps it too
    assert neighbours.likeliest_extension(ID[b'":'], allowed, torch.zeros(len(VOCAB))) == ID[b'":']
    assert neighbours.likeliest_extension(ID[b'":'], _allowed(b'":', b"x"), logits) == ID[b'":']
