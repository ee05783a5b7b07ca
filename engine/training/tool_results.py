"""What tool results look like in the corpus: the fields real tools add, and reshaping.

A concept's result function returns the fields its answers quote. Real tools return
more: :func:`with_extras` adds 0–3 unrelated fields and sometimes shuffles them
(both splits). :func:`reshaped` is a training-only perturbation
(``Augmentation.reshaped_results``): the result loses fields its answer does not
quote and gains 2–6 others from a wider pool. Without it, a small model learns to
recognise a concept by the *shape* of its result (a lookup returns exactly
``order_id, status, total, items``) instead of by the tool that was called, and a
real tool that returns ``refunded`` or ``customer`` fields gets another concept's
answer. It is off in :data:`.augment.TRAINING`: the one stage trained with it
(``tiny-ar-stage6.json``) did not improve held-out answers and made the demo's
answers worse, so it is not shipped (docs/models.md).

:func:`with_more_extras` (``Augmentation.more_extras``, training only) is the mild
form: the extra fields come from the same pool as :func:`with_extras`' (no new
names), 2–5 of them instead of 0–3, and a field the answer does not quote is
dropped with probability 1/2. A lookup's row in a real shop has five or six extra
columns and no ``items`` (the demo's does); this shows the model such rows with
the lookup's own answers.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable
from typing import Any

from . import slots

Draw = Callable[[random.Random], Any]


def _person(rng: random.Random) -> str:
    return f"{rng.choice(slots._FIRST).capitalize()} {rng.choice(slots._LAST).capitalize()}"


#: Both splits draw from this pool (changing it changes the held-out split).
EXTRA_FIELDS: tuple[tuple[str, Draw], ...] = (
    ("placed", lambda r: slots.date(r).value),
    ("updated_at", lambda r: slots.date(r).value),
    ("customer_id", lambda r: slots.customer_id(r).value),
    ("customer", _person),
    ("email", lambda r: slots.email(r).value),
    ("refunded", lambda r: r.choice((0, 0, 10.5, 20))),
    ("currency", lambda r: r.choice(("EUR", "USD"))),
    ("region", lambda r: r.choice(("eu-west", "us-east", "ap-south"))),
    ("request_id", lambda r: f"req-{r.randint(10000, 99999)}"),
    ("ok", lambda r: True),
)

#: Only the training-only reshaping draws from these, on top of :data:`EXTRA_FIELDS`.
_MORE_FIELDS: tuple[tuple[str, Draw], ...] = (
    ("created_at", lambda r: slots.date(r).value),
    ("owner", _person),
    ("contact", lambda r: slots.email(r).value),
    ("id", lambda r: f"{r.choice('abcdefk')}{r.randint(100, 99999)}"),
    ("count", lambda r: r.randint(0, 40)),
    ("version", lambda r: r.randint(1, 9)),
    ("source", lambda r: r.choice(("web", "api", "phone", "import", "cron"))),
    ("channel", lambda r: r.choice(("email", "chat", "sms", "slack"))),
    ("priority", lambda r: r.choice(("low", "normal", "high"))),
    ("archived", lambda r: r.choice((True, False))),
    ("flagged", lambda r: r.choice((True, False))),
    ("notes", lambda r: r.choice(("", "n/a", "checked", "see ticket"))),
    ("tags", lambda r: r.sample(["vip", "new", "eu", "b2b", "promo"], r.randint(0, 2))),
    ("balance", lambda r: round(r.randint(0, 900) + r.randint(0, 99) / 100, 2)),
    ("score", lambda r: round(r.random(), 2)),
    ("page", lambda r: 1),
    ("next", lambda r: None),
    ("link", lambda r: f"https://example.com/r/{r.randint(1000, 9999)}"),
)


def with_extras(rng: random.Random, result: dict[str, Any]) -> dict[str, Any]:
    """``result`` plus 0–3 unrelated fields from :data:`EXTRA_FIELDS`, maybe reordered."""
    out = dict(result)
    for key, draw in rng.sample(EXTRA_FIELDS, rng.choice((0, 0, 1, 2, 3))):
        if key not in out:
            out[key] = draw(rng)
    if rng.random() < 0.3:
        items = list(out.items())
        rng.shuffle(items)
        out = dict(items)
    return out


def reshaped(rng: random.Random, result: dict[str, Any], quoted: Iterable[str]) -> dict[str, Any]:
    """``result`` without some of the fields not in ``quoted``, with 2–6 new ones, shuffled."""
    return _regrown(rng, result, quoted, EXTRA_FIELDS + _MORE_FIELDS, (2, 6), shuffle=1.0)


def with_more_extras(
    rng: random.Random, result: dict[str, Any], quoted: Iterable[str]
) -> dict[str, Any]:
    """``result`` without some of the fields not in ``quoted``, plus 2–5 fields of
    :data:`EXTRA_FIELDS` (the pool both splits use), maybe reordered."""
    return _regrown(rng, result, quoted, EXTRA_FIELDS, (2, 5), shuffle=0.5)


def _regrown(
    rng: random.Random,
    result: dict[str, Any],
    quoted: Iterable[str],
    pool: tuple[tuple[str, Draw], ...],
    added: tuple[int, int],
    *,
    shuffle: float,
) -> dict[str, Any]:
    """Drop each field not in ``quoted`` with probability 1/2, add ``added`` fields of
    ``pool``, and shuffle the order with probability ``shuffle``."""
    keep = set(quoted)
    out = {k: v for k, v in result.items() if k in keep or rng.random() < 0.5}
    for key, draw in rng.sample(pool, rng.randint(*added)):
        if key not in out:
            out[key] = draw(rng)
    if shuffle >= 1.0 or rng.random() < shuffle:  # no draw when always: streams stay as they were
        items = list(out.items())
        rng.shuffle(items)
        out = dict(items)
    return out
