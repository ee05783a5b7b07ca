"""Preferences on a session's closed choices: bonuses by value, and key choices.

A runtime that knows more than the model about a step — which tools a request
is about, whether it needs a tool at all (:mod:`agentflow.engine.tool_priors`) —
passes it to the constraint session as log-space bonuses: on the candidates of
a closed value choice (:meth:`SessionPreferences.prefer`), and on a choice
among object keys, which only bonuses make a closed choice
(:meth:`SessionPreferences.prefer_keys`). The decoder still scores every
candidate whole (``score_choices``); the bonuses are added to those scores.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

import numpy as np

from .closed_choices import Candidate, ClosedChoice

if TYPE_CHECKING:
    from .enforcement import Constraint


class SessionPreferences:
    """The preference methods of a constraint session (a mixin of ``ConstraintSession``)."""

    _c: Constraint
    _tokens: list[int]
    #: Log-space bonuses of closed-choice values (:meth:`prefer`).
    _preferred: Mapping[str, float] = {}
    #: True: a value the output already holds loses its bonus (:meth:`prefer`).
    _prefer_once: bool = False
    #: Bonuses added whatever the output holds (``prefer(..., lasting=...)``).
    _lasting: Mapping[str, float] = {}
    #: Log-space bonuses of object keys that make a key choice (:meth:`prefer_keys`).
    _key_bonuses: Mapping[str, float] = {}
    #: The value the first closed choice offering it takes (:meth:`pick_first`).
    _first_pick: str | None = None

    @property
    def preferred(self) -> Mapping[str, float]:
        """The closed-choice bonuses set by :meth:`prefer` (empty: none)."""
        return self._preferred

    def prefer(
        self,
        bonuses: Mapping[str, float],
        *,
        once: bool = False,
        lasting: Mapping[str, float] | None = None,
    ) -> None:
        """Add ``bonuses[value]`` (log-space) to the score of each candidate of a closed
        choice whose every candidate string is a key of ``bonuses`` (the tool names,
        for a tool-name choice; never an object key or a copy) when the decoder scores
        the choice whole (``score_choices``). An empty mapping turns it off.
        ``agentflow`` passes tool relevance here (:mod:`agentflow.engine.tool_relevance`).
        With ``once``, a value the output already holds as a JSON string gets the
        lowest of the choice's bonuses from then on: the tool of a first call is not
        favoured again for the parallel call after it. ``lasting`` bonuses are added
        on top for every call, ``once`` or not (``agentflow`` passes the penalties of
        tools a request's values cannot fill: :mod:`agentflow.engine.argument_fit`);
        a value missing from one mapping gets 0 from it."""
        self._preferred = _checked(bonuses, "prefer")
        self._prefer_once = once
        self._lasting = _checked(lasting or {}, "prefer")

    def pick_first(self, value: str | None) -> None:
        """Make the first closed value choice that offers ``value`` take it: until the
        output holds ``value`` as a JSON string, such a choice has it as its one
        candidate (``GenerationConfig.second_choice`` decodes a runner-up tool this
        way). None turns it off."""
        if value is not None and not isinstance(value, str):
            raise TypeError(f"pick_first takes a string or None, got {type(value).__name__}")
        self._first_pick = value

    def prefer_keys(self, bonuses: Mapping[str, float]) -> None:
        """Make a choice among object keys whose every candidate is a key of ``bonuses``
        a closed choice, scored whole (``score_choices``) with ``bonuses[key]`` added:
        ``agentflow`` passes ``{"final": b, "tool_calls": 0}`` where a request looks
        like one no tool serves (:mod:`agentflow.engine.tool_priors`).
        Other key choices stay the model's, token by token; an empty mapping turns
        it off."""
        self._key_bonuses = _checked(bonuses, "prefer_keys")

    def _key_choice(
        self, state: int, fitting: Callable[[tuple[Candidate, ...]], ClosedChoice | None]
    ) -> ClosedChoice | None:
        """The key choice at ``state`` with its bonuses (:meth:`prefer_keys`), fitted by
        ``fitting``; None when there is none or a key has no bonus."""
        if not self._key_bonuses:
            return None
        keys = self._c.key_candidates(state)
        if keys is None or not all(c.text in self._key_bonuses for c in keys):
            return None
        choice = fitting(keys)
        if choice is None:
            return None
        bonus = tuple(float(self._key_bonuses[c.text]) for c in choice.candidates)
        return replace(choice, key=True, bonus=bonus)

    def _preferring(
        self, choice: ClosedChoice | None, before: Sequence[int] = ()
    ) -> ClosedChoice | None:
        """``choice`` with its candidates' bonuses (:meth:`prefer`); ``before``: the
        block's tokens between the prefix and the choice."""
        if choice is not None and self._first_pick is not None:
            picked = [c for c in choice.candidates if c.text == self._first_pick]
            if picked and not self._held_strings([self._first_pick], before):
                return replace(choice, candidates=(picked[0],), bonus=())
        if choice is None or not (self._preferred or self._lasting):
            return choice
        texts = [c.text for c in choice.candidates]
        if not all(t in self._preferred or t in self._lasting for t in texts):
            return choice  # another choice (an enum), not the one the bonuses rank
        bonus = tuple(float(self._preferred.get(t, 0.0)) for t in texts)
        if self._prefer_once and self._preferred:
            held = self._held_strings(texts, before)
            if held:
                low = min(bonus)
                bonus = tuple(low if t in held else b for t, b in zip(texts, bonus, strict=True))
        bonus = tuple(
            b + float(self._lasting.get(t, 0.0)) for t, b in zip(texts, bonus, strict=True)
        )
        return replace(choice, bonus=bonus) if any(bonus) else choice

    def _held_strings(self, texts: Sequence[str], before: Sequence[int]) -> set[str]:
        """Those of ``texts`` that the output (the prefix, then ``before``) holds as JSON strings."""
        token_bytes = self._c.forced.token_bytes
        output = b"".join(token_bytes[t] for t in (*self._tokens, *before))
        return {t for t in texts if json.dumps(t, ensure_ascii=False).encode() in output}


def _checked(bonuses: Mapping[str, float], method: str) -> dict[str, float]:
    """``bonuses`` as a dict; ValueError naming ``method`` unless every key is a string
    and every bonus finite."""
    bad = [k for k, v in bonuses.items() if not isinstance(k, str) or not np.isfinite(v)]
    if bad:
        raise ValueError(f"{method} takes finite bonuses keyed by strings, got {bad[:3]!r}")
    return dict(bonuses)
