"""Seeded generator of agent conversations in the embedded chat template.

Each :class:`Sample` is a conversation whose *last* assistant turn is the training
target (everything before it is context): a tool call, parallel tool calls, a final
answer composed from a tool result, or a reply that needs no tool. Tools are
randomized per sample (names, descriptions, parameter names, optional/nullable
forms, extra unused parameters, 2–8 tools with look-alike distractors), so the
model has to read the tool list and copy argument values from the user's words.

``split="heldout"`` draws from the held-out parts of every pool (tool-name verbs,
descriptions, parameter names, request templates, chatter, instructions), which
training never sees. The training split is also perturbed (:mod:`.augment`): some
tool-name verbs, tool names and parameter names are generic or made up, and some
requests lose a few words, so that names cannot be memorized in place of reading.
``split="unseen"`` is the held-out split with its requests asked in words of
their own (:mod:`.unseen_phrasings`), which no seed of the other two draws.
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from ..chat_template import (
    ChatMessage,
    ToolSpec,
    compact_json,
    format_final,
    format_tool_calls,
    render_choice_prior,
    render_prompt,
)
from . import augment, phrasing, tool_results
from .augment import Augmentation
from .concepts import Concept, Param, Split, split_pool
from .slots import Drawn
from .structured_finals import structured_output
from .tool_maker import ALL_CONCEPTS, POOL_WORDS, Tool, ToolMaker
from .unseen_phrasings import UNSEEN_REQUESTS

#: The splits a generator draws: :data:`.concepts.Split`'s pools, and ``unseen``
#: (the held-out pools, requests from :mod:`.unseen_phrasings`).
CorpusSplit = Split | Literal["unseen"]

#: Bumped whenever the same (split, seed) starts drawing different samples.
CORPUS_VERSION = 5
_KIND_WEIGHTS = {"call": 0.47, "parallel": 0.12, "final": 0.24, "no_tool": 0.11, "chain": 0.06}
_DOMAIN_WEIGHTS = {"support": 0.42, "itops": 0.4, "general": 0.18}
_PLACEHOLDER = re.compile(r"\{(\w+)\}")


@dataclass(frozen=True)
class Sample:
    """One conversation; ``target`` is the action JSON of its last assistant turn."""

    tools: tuple[ToolSpec, ...]
    messages: tuple[ChatMessage, ...]
    target: str
    domain: str
    kind: str
    instructions: str | None = None
    calls: tuple[tuple[str, dict[str, Any]], ...] = ()
    final: str | None = None
    # Argument surfaces that must appear verbatim in the last user message.
    copied: tuple[str, ...] = field(default=())
    #: The JSON Schema of a structured final output (kind ``structured``), and the
    #: expected output; None for a text answer.
    output_schema: dict[str, Any] | None = None
    output: dict[str, Any] | None = None

    def prompt(self) -> str:
        """The rendered context, ending with ``<|assistant|>``."""
        return render_prompt(
            self.messages, self.tools, instructions=self.instructions, output=self.output_schema
        )

    def choice_prior(self) -> str | None:
        """The context without the request (``GenerationConfig.score_choices``)."""
        return render_choice_prior(
            self.messages, self.tools, instructions=self.instructions, output=self.output_schema
        )


@dataclass
class _Request:
    text: str
    calls: list[tuple[str, dict[str, Any]]]
    by_role: list[dict[str, Any]]
    copied: list[str]
    #: Every value as the user types it (a host list too), whose case the message keeps.
    typed: list[str]


class CorpusGenerator:
    """Draws :class:`Sample` s for one split from one seed (fully reproducible)."""

    def __init__(
        self,
        split: CorpusSplit = "train",
        seed: int = 0,
        augmentation: Augmentation | None = None,
    ) -> None:
        """``augmentation`` defaults to :data:`augment.TRAINING` for training, none for
        the others. ``split="unseen"`` is the held-out split with every request asked
        in the words of :mod:`.unseen_phrasings` instead."""
        if split not in ("train", "heldout", "unseen"):
            raise ValueError(f"split must be 'train', 'heldout' or 'unseen', got {split!r}")
        #: Whether requests are phrased from :data:`.unseen_phrasings.UNSEEN_REQUESTS`.
        self.unseen = split == "unseen"
        self.split: Split = "heldout" if split == "unseen" else split
        if augmentation is None:
            augmentation = augment.TRAINING if split == "train" else augment.NONE
        self.augmentation = augmentation
        self.rng = random.Random(f"{split}:{seed}")
        self.tools = ToolMaker(self.rng, self.split, augmentation)
        self.by_domain: dict[str, list[Concept]] = {}
        for concept in ALL_CONCEPTS:
            self.by_domain.setdefault(concept.domain, []).append(concept)

    def _chance(self, p: float) -> bool:
        return augment.chance(self.rng, p)

    def _pool(self, pool: Any) -> list[Any]:
        return split_pool(pool, self.split)

    def _joiner(self) -> str:
        """What joins the two requests of a parallel (or made-up tools) conversation."""
        if self._chance(self.augmentation.more_connectors):
            return self.rng.choice(phrasing.MORE_CONNECTORS)
        return self.rng.choice(self._pool(phrasing.CONNECTORS))

    # -- requests ------------------------------------------------------------

    def _fill(
        self, template: str, drawn: dict[str, Drawn], casing: str, typo: bool, drop: float = 0.0
    ) -> str:
        """The template with its placeholders filled; literal words may vary or be dropped."""

        def literal(text: str) -> str:
            if drop:
                text = augment.drop_words(text, self.rng, drop)
            return phrasing.vary_literal(text, self.rng, casing, typo)

        out: list[str] = []
        pos = 0
        for m in _PLACEHOLDER.finditer(template):
            out.append(literal(template[pos : m.start()]))
            out.append(drawn[m.group(1)].surface)
            pos = m.end()
        out.append(literal(template[pos:]))
        return "".join(out)

    def _draw(self, tool: Tool, param: Param) -> Drawn:
        """A value for ``param``; enum-declared free text maps the user's phrase to its enum value."""
        if param.role in tool.enum_roles:
            phrase, value = self.rng.choice(param.enum_from)
            return Drawn(phrase, value, False)
        return param.draw(self.rng)

    def _request(self, tool: Tool, casing: str) -> _Request:
        rng = self.rng
        concept = tool.concept
        drawn = {p.role: self._draw(tool, p) for p in tool.params if p.required}
        typo = rng.random() < 0.08
        aug = self.augmentation
        drop = aug.drop_rate if self._chance(aug.drop_words) else 0.0
        requests = UNSEEN_REQUESTS[concept.key] if self.unseen else self._pool(concept.requests)
        text = self._fill(rng.choice(requests), drawn, casing, typo, drop)
        for param in tool.params:
            if param.required or (param.role not in tool.forced and rng.random() < 0.5):
                continue
            value = self._draw(tool, param)
            if param.kind == "boolean":
                phrases = param.mention if value.value else param.mention_false
                phrase = rng.choice(self._pool(phrases))
                text += " " + phrasing.vary_literal(phrase, rng, casing, False)
            else:
                phrase = rng.choice(self._pool(param.mention))
                text += " " + self._fill(phrase, {"v": value}, casing, False)
            drawn[param.role] = value
        by_role = {role: d.value for role, d in drawn.items()}
        args = {tool.keys[p.role]: drawn[p.role].value for p in tool.params if p.role in drawn}
        copied = [d.surface for d in drawn.values() if d.copied and d.surface]
        typed = [d.surface for d in drawn.values() if d.surface]
        return _Request(text, [(tool.spec.name, args)], [by_role], copied, typed)

    def _decorate(self, text: str, casing: str, protect: Sequence[str] = ()) -> str:
        """Add chatter around ``text``; never change the case of a ``protect`` ed value."""
        rng = self.rng
        starts_with_value = any(text.startswith(v) for v in protect if v)
        if rng.random() < 0.3:
            text = rng.choice(self._pool(phrasing.PREFIXES)) + " " + text
        elif (
            casing == "plain"
            and rng.random() < 0.6
            and text[:1].isalpha()
            and not starts_with_value
        ):
            text = text[0].upper() + text[1:]
        if rng.random() < 0.3:
            text = (
                text
                + rng.choice((" ", ", ", ". ", " - "))
                + rng.choice(self._pool(phrasing.SUFFIXES))
            )
        return text

    def _casing(self) -> str:
        r = self.rng.random()
        return "lower" if r < 0.1 else "upper" if r < 0.13 else "plain"

    # -- samples -------------------------------------------------------------

    def _concept(self, domain: str | None = None) -> Concept:
        rng = self.rng
        if domain is None:
            domain = rng.choices(list(_DOMAIN_WEIGHTS), weights=list(_DOMAIN_WEIGHTS.values()))[0]
        return rng.choice(self.by_domain[domain])

    def _instructions(self) -> str | None:
        if self.rng.random() < 0.4:
            return None
        return self.rng.choice(self._pool(phrasing.INSTRUCTIONS))

    def sample(self) -> Sample:
        """Draw one sample."""
        rng = self.rng
        if self._chance(self.augmentation.made_up_intent):
            return self._made_up()
        kind = rng.choices(list(_KIND_WEIGHTS), weights=list(_KIND_WEIGHTS.values()))[0]
        if kind == "call" and self._chance(self.augmentation.more_parallel):
            kind = "parallel"
        if kind == "call" and self._chance(self.augmentation.more_chains):
            kind = "chain"  # the look-up a refund without an amount needs first
        if kind == "no_tool":
            return self._no_tool()
        if kind == "chain":
            return self._chain()
        first = self._concept()
        if kind == "parallel":
            second = self._concept(first.domain if rng.random() < 0.7 else None)
            wanted = [first] if second is first else [first, second]
            tools, primary = self.tools.toolset(wanted)
            casing = self._casing()
            req_a = self._request(primary[0], casing)
            req_b = self._request(primary[-1], casing)
            joiner = self._joiner()
            text = self._decorate(req_a.text + joiner + req_b.text, casing, req_a.typed)
            calls = req_a.calls + req_b.calls
            return Sample(
                self.tools.specs(tools),
                (ChatMessage("user", text),),
                format_tool_calls(calls),
                first.domain,
                "parallel",
                self._instructions(),
                calls=tuple(calls),
                copied=tuple(req_a.copied + req_b.copied),
            )
        tools, primary = self.tools.toolset([first])
        casing = self._casing()
        req = self._request(primary[0], casing)
        text = self._decorate(req.text, casing, req.typed)
        history = self._history(tools) if rng.random() < 0.1 else []
        messages = [*history, ChatMessage("user", text)]
        if kind == "call":
            return Sample(
                self.tools.specs(tools),
                tuple(messages),
                format_tool_calls(req.calls),
                first.domain,
                "call",
                self._instructions(),
                calls=tuple(req.calls),
                copied=tuple(req.copied),
            )
        name = req.calls[0][0]
        output_schema: dict[str, Any] | None = None
        output: Any = None
        if rng.random() < 0.1:
            error = rng.choice(phrasing.ERROR_RESULTS).format(tool=name, n=rng.choice((5, 10, 30)))
            result: dict[str, Any] = {"error": error}
            answer = rng.choice(self._pool(phrasing.ERROR_FINALS)).format(error=error)
        else:
            result = tool_results.with_extras(rng, first.result(rng, req.by_role[0]))
            template = rng.choice(self._pool(first.finals))
            answer = template.format(**{**req.by_role[0], **result})
            if self._chance(self.augmentation.reshaped_results):
                result = tool_results.reshaped(rng, result, _PLACEHOLDER.findall(template))
            elif self._chance(self.augmentation.more_extras):
                quoted = _PLACEHOLDER.findall(template)
                result = tool_results.with_more_extras(rng, result, quoted)
            if not history and self._chance(self.augmentation.structured_finals):
                output_schema, output = structured_output(
                    rng,
                    self.split,
                    result,
                    answer,
                    _PLACEHOLDER.findall(template),
                    lambda: first.result(rng, req.by_role[0]),
                )
        messages += [
            ChatMessage("assistant", format_tool_calls(req.calls)),
            ChatMessage("tool", compact_json(result), name=name),
        ]
        return Sample(
            self.tools.specs(tools),
            tuple(messages),
            format_final(answer if output is None else output),
            first.domain,
            "final" if output is None else "structured",
            self._instructions(),
            final=answer,
            output_schema=output_schema,
            output=output,
        )

    def _history(self, tools: list[Tool]) -> list[ChatMessage]:
        """An earlier, finished exchange with one of the listed tools."""
        tool = self.rng.choice(tools)
        req = self._request(tool, "plain")
        result = tool.concept.result(self.rng, req.by_role[0])
        answer = self.rng.choice(self._pool(tool.concept.finals)).format(
            **{**req.by_role[0], **result}
        )
        return [
            ChatMessage("user", req.text),
            ChatMessage("assistant", format_tool_calls(req.calls)),
            ChatMessage("tool", compact_json(result), name=tool.spec.name),
            ChatMessage("assistant", format_final(answer)),
        ]

    def _chain(self) -> Sample:
        """Refund without an amount: look the order up, refund its total, then answer."""
        rng = self.rng
        lookup, refund = (c for c in ALL_CONCEPTS if c.key in ("get_order", "refund_order"))
        tools, (get_tool, refund_tool) = self.tools.toolset([lookup, refund])
        reason = next(p for p in refund.params if p.role == "reason")
        order, why = lookup.params[0].draw(rng), self._draw(refund_tool, reason)
        casing = self._casing()
        text = self._fill(
            rng.choice(self._pool(phrasing.CHAIN_REFUND)),
            {"order": order, "reason": why},
            casing,
            rng.random() < 0.08,
        )
        messages = [ChatMessage("user", self._decorate(text, casing, [order.surface]))]
        get_call = [(get_tool.spec.name, {get_tool.keys["order"]: order.value})]
        stage = rng.randrange(3)
        if stage == 0:
            return Sample(
                self.tools.specs(tools),
                tuple(messages),
                format_tool_calls(get_call),
                "support",
                "chain",
                self._instructions(),
                calls=tuple(get_call),
                copied=(order.surface,),
            )
        found = tool_results.with_extras(rng, lookup.result(rng, {"order": order.value}))
        messages += [
            ChatMessage("assistant", format_tool_calls(get_call)),
            ChatMessage("tool", compact_json(found), name=get_tool.spec.name),
        ]
        values = {"order": order.value, "amount": found["total"], "reason": why.value}
        args = {refund_tool.keys[p.role]: values[p.role] for p in refund_tool.params}
        refund_call = [(refund_tool.spec.name, args)]
        if stage == 1:
            return Sample(
                self.tools.specs(tools),
                tuple(messages),
                format_tool_calls(refund_call),
                "support",
                "chain",
                self._instructions(),
                calls=tuple(refund_call),
                copied=(order.surface,),
            )
        done = refund.result(rng, values)
        messages += [
            ChatMessage("assistant", format_tool_calls(refund_call)),
            ChatMessage("tool", compact_json(done), name=refund_tool.spec.name),
        ]
        answer = rng.choice(self._pool(refund.finals)).format(**{**values, **done})
        return Sample(
            self.tools.specs(tools),
            tuple(messages),
            format_final(answer),
            "support",
            "chain",
            self._instructions(),
            final=answer,
        )

    def _made_up(self) -> Sample:
        """Made-up tools asked for in their own words: choosing one needs reading the list."""
        rng = self.rng
        avoid = set(POOL_WORDS)
        made = [self.tools.made_up(avoid)]
        for _ in range(rng.choice((1, 2, 2, 3, 4, 5))):
            noun = made[0].noun if rng.random() < 0.3 else None  # same noun, other verb
            made.append(self.tools.made_up(avoid, noun))
        wanted = made[:2] if rng.random() < 0.2 else made[:1]
        taken = {t.spec.name for t in made}
        real = []
        for concept in rng.sample(ALL_CONCEPTS, rng.choice((0, 0, 1, 2))):
            tool = self.tools.make_tool(concept, taken)
            taken.add(tool.spec.name)
            real.append(tool.spec)
        specs = [t.spec for t in made] + real
        rng.shuffle(specs)
        requests = [t.request(rng) for t in wanted]
        joiner = self._joiner()
        copied = [c for r in requests for c in r.copied]
        text = self._decorate(joiner.join(r.text for r in requests), "plain", copied)
        calls = [r.call for r in requests]
        return Sample(
            tuple(specs),
            (ChatMessage("user", text),),
            format_tool_calls(calls),
            "general",
            "made_up",
            self._instructions(),
            calls=tuple(calls),
            copied=tuple(copied),
        )

    def _no_tool(self) -> Sample:
        rng = self.rng
        request, reply = rng.choice(self._pool(phrasing.NO_TOOL))
        casing = self._casing()
        text = self._decorate(phrasing.vary_literal(request, rng, casing, False), casing)
        domain = rng.choices(list(_DOMAIN_WEIGHTS), weights=list(_DOMAIN_WEIGHTS.values()))[0]
        tools = [] if rng.random() < 0.2 else self.tools.toolset([self._concept(domain)])[0]
        return Sample(
            self.tools.specs(tools),
            (ChatMessage("user", text),),
            format_final(reply),
            domain,
            "no_tool",
            self._instructions(),
            final=reply,
        )

    def samples(self, n: int) -> Iterator[Sample]:
        """``n`` samples in order."""
        for _ in range(n):
            yield self.sample()
