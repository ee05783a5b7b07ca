"""Free-text states of a token automaton (``GenerationConfig.text_threshold``).

A state is *free text* when most bytes may follow it: inside a string the
schema leaves open (an argument copied from the request, a message), as
opposed to the structure around it (keys, punctuation, numbers, enum values,
patterned strings), where only a few bytes may come next. The test reads the
automaton's single-byte transitions only, so it holds for regex constraints as
well as JSON Schema ones.
"""

from __future__ import annotations

import numpy as np

from .jump_forward import ForcedText

#: Distinct bytes that must be able to follow a state for it to count as free text.
#: An open JSON string allows about 220; a number at most 14; a key, an enum or a
#: patterned string (digits, an e-mail's local part) far fewer than 64.
FREE_TEXT_MIN_BYTES = 64


def free_text_states(forced: ForcedText, live: np.ndarray) -> np.ndarray | None:
    """bool [S]: the free-text states; None when the vocabulary is not byte-complete."""
    nxt = forced.byte_next
    if nxt is None:
        return None
    allowed = (nxt >= 0) & live[np.maximum(nxt, 0)]
    return allowed.sum(axis=1) >= FREE_TEXT_MIN_BYTES
