"""When hybrid decoding drafts, and how long its drafts are.

A draft round (one draft, one verify) emits on average ``E[m]`` tokens the
models had to choose: the draft tokens the verifier kept plus its own token.
Tokens the constraint forces are free on both paths (no forward pass of their
own), so they do not count. A plain autoregressive (AR) step of the verifier
emits exactly one such token. Drafting pays iff

    E[m] / (c_draft + c_verify) > 1 / c_ar

where ``c_draft``, ``c_verify`` and ``c_ar`` are the seconds one draft, one
verify of a draft and one verifier-only step take, measured online (median of
the recent calls, so a preempted call does not swing the decision). ``E[m]`` is
a moving average over the recent draft rounds. Costs and acceptance are kept
per :class:`HybridEngine` (they are properties of the model pair and the
machine), so a request starts from what the previous ones measured.

While drafting does not pay, the verifier decodes alone and drafting is probed
again after ``interval`` times as many AR steps as the failed round cost (a
request's first draft also prefills the drafter, which can cost many steps); a
failed probe doubles the interval (up to a maximum), a probe that pays resets it;
a probe that must prefill the drafter first waits that much longer again.
A request's first draft also prefills the drafter's cache: outside a probe, a
request starts drafting only if the saving over an average request's remaining
model-chosen tokens exceeds that prefill (:meth:`Scheduler.cold_start_pays`).
"""

from __future__ import annotations

import math
import statistics
from collections import deque


class DraftLength:
    """The next draft's length from the recent acceptance.

    A fully kept draft doubles the length (up to the maximum); otherwise the length
    follows a moving average of the kept tokens, plus one.
    """

    def __init__(self, initial: int, minimum: int, maximum: int, smoothing: float = 0.5) -> None:
        self.minimum, self.maximum, self.smoothing = minimum, maximum, smoothing
        self.length = max(minimum, min(initial, maximum))
        self._mean = float(self.length)

    def update(self, proposed: int, kept: int) -> None:
        """Record a round that proposed ``proposed`` tokens and kept ``kept`` of them."""
        if proposed == 0:
            return
        self._mean = (1 - self.smoothing) * self._mean + self.smoothing * kept
        grown = 2 * proposed if kept == proposed else math.ceil(self._mean) + 1
        self.length = max(self.minimum, min(grown, self.maximum))


class CostMeter:
    """Seconds per call of one path: the median of the last ``window`` measurements."""

    def __init__(self, window: int = 15) -> None:
        self._samples: deque[float] = deque(maxlen=window)

    def add(self, seconds: float) -> None:
        self._samples.append(max(seconds, 0.0))

    @property
    def value(self) -> float | None:
        return statistics.median(self._samples) if self._samples else None

    def __len__(self) -> int:
        return len(self._samples)


class Scheduler:
    """One engine's choice, round by round, between a draft round and a verifier-only step.

    It keeps what has been measured (costs, acceptance, the probe interval and
    countdown) across requests: they belong to the model pair and the machine,
    and a back-off longer than one request must still count down to a probe.
    """

    def __init__(
        self,
        *,
        adaptive: bool = True,
        first_interval: int = 4,
        max_interval: int = 64,
        smoothing: float = 0.5,
    ) -> None:
        self.adaptive = adaptive
        self.first_interval, self.max_interval = first_interval, max_interval
        self.smoothing = smoothing
        self.draft, self.verify, self.ar = CostMeter(), CostMeter(), CostMeter()
        #: Seconds of a request's first draft, which also prefills the drafter's cache.
        self.cold = CostMeter()
        #: Moving average of model-chosen tokens per request (None: no request yet).
        self.tokens_per_request: float | None = None
        #: Moving average of model-chosen tokens per draft round (None: no round yet).
        self.tokens_per_round: float | None = None
        #: Verifier-only steps before the next probe once drafting stops paying.
        self.interval = first_interval
        #: The draft length the last request ended with (None: none yet).
        self.draft_length: int | None = None
        self.drafting = True
        self._countdown = 0
        self._probing = False

    def drafting_pays(self) -> bool:
        """The rule of the module docstring; True until both paths have been measured."""
        m, cd, cv = self.tokens_per_round, self.draft.value, self.verify.value
        if m is None or cd is None or cv is None:
            return True
        # Before any verifier-only step, assume one costs what a verify does (an upper bound).
        ca = self.ar.value if self.ar.value is not None else cv
        return m * ca > cd + cv

    def cold_start_pays(self, chosen: int) -> bool:
        """Whether prefilling the drafter now pays off over the rest of an average request.

        ``chosen``: model-chosen tokens the request has so far. Drafting saves
        ``c_ar - (c_draft + c_verify) / E[m]`` seconds per model-chosen token; the
        request's first draft costs the prefill on top (``c_cold - c_draft``).
        """
        m, cv, cold = self.tokens_per_round, self.verify.value, self.cold.value
        left = math.inf if self.tokens_per_request is None else self.tokens_per_request - chosen
        # A round of m <= 1 tokens saves nothing, nor does drafting for a last token (the
        # verifier's own token comes with the pass it makes anyway), whatever the costs.
        if (m is not None and m <= 1) or left <= 1:
            return False
        if m is None or cv is None or cold is None:
            return True  # not measured yet: explore
        cd = self.draft.value if self.draft.value is not None else cold  # pessimistic
        ca = self.ar.value if self.ar.value is not None else cv
        gain = ca - (cd + cv) / m
        return gain > 0 and left * gain > cold - cd

    def draft_next(self, *, cold: bool = False, chosen: int = 0) -> bool:
        """Whether the next round drafts (a probe when the verifier was decoding alone).

        ``cold``: the drafter has not drafted in this request yet (its cache is empty);
        ``chosen``: model-chosen tokens the request has so far.
        """
        if not self.adaptive:
            return True
        if self.drafting:
            if not cold or self.cold_start_pays(chosen):
                return True
            # Not worth a prefill for this request: decode alone, probe again later.
            self.drafting = False
            self._countdown = self.interval
            return False
        if self._countdown <= -(self._prefill_steps() if cold else 0):
            self._probing = True
            return True
        return False

    def _prefill_steps(self) -> int:
        """A cold probe waits ``interval`` times longer by the steps its drafter prefill costs."""
        cold, cd = self.cold.value, self.draft.value
        ca = self.ar.value if self.ar.value is not None else self.verify.value
        if cold is None or cd is None or not ca:
            return 0
        return self.interval * math.ceil(max(cold - cd, 0.0) / ca)

    def after_round(
        self, model_tokens: int, draft_s: float, verify_s: float | None, *, cold: bool = False
    ) -> None:
        """Record a draft round: tokens the models chose and what its draft and verify took.

        ``cold``: the draft also prefilled the drafter's cache (a request's first draft),
        so its time is not a draft's cost; ``verify_s`` None: the verify was the prefill.
        """
        (self.cold if cold else self.draft).add(draft_s)
        if verify_s is not None:
            self.verify.add(verify_s)
        prev = self.tokens_per_round
        a = self.smoothing
        self.tokens_per_round = (
            float(model_tokens) if prev is None else (1 - a) * prev + a * model_tokens
        )
        if not self.adaptive:
            return
        if self.drafting_pays():
            self.drafting = True
            if self._probing:
                self.interval = self.first_interval
        else:
            if self._probing:
                self.interval = min(2 * self.interval, self.max_interval)
            self.drafting = False
            # Back off in units of what this round cost (a cold draft's prefill included),
            # so probing stays a bounded share (about 1 / interval) of the decoding time.
            spent = draft_s + (verify_s if verify_s is not None else self.verify.value or 0.0)
            step = self.ar.value or self.verify.value or spent or 1.0
            self._countdown = self.interval * max(1, math.ceil(spent / step))
        self._probing = False

    def after_ar_step(self, seconds: float | None) -> None:
        """Record a verifier-only step and its cost (None: not measured, e.g. the prefill)."""
        if seconds is not None:
            self.ar.add(seconds)
        self._countdown -= 1

    def end_request(self, chosen: int) -> None:
        """Record a finished request's model-chosen tokens."""
        prev, a = self.tokens_per_request, self.smoothing
        self.tokens_per_request = float(chosen) if prev is None else (1 - a) * prev + a * chosen
