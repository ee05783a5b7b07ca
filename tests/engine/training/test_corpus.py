"""The generated corpus: valid actions, copied arguments, every kind, a truly held-out split."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import random
import re
from collections import Counter

import jsonschema
import pytest

from agentflow.action_schema import build_action_schema
from agentflow.engine.chat_template import ASSISTANT
from agentflow.engine.training import augment
from agentflow.engine.training.augment import drop_words, opaque_key, opaque_verb
from agentflow.engine.training.concepts import split_pool
from agentflow.engine.training.corpus import ALL_CONCEPTS, CorpusGenerator, Sample
from agentflow.engine.training.tool_maker import EXTRA_PARAMS
from agentflow.engine.training.tool_results import EXTRA_FIELDS, reshaped, with_more_extras


@pytest.fixture(scope="module")
def train_samples() -> list[Sample]:
    return list(CorpusGenerator("train", 0).samples(400))


@pytest.fixture(scope="module")
def heldout_samples() -> list[Sample]:
    return list(CorpusGenerator("heldout", 0).samples(200))


def _check(sample: Sample) -> None:
    action = json.loads(sample.target)
    schema = build_action_schema(sample.tools, sample.output_schema)
    jsonschema.validate(action, schema)
    if "tool_calls" in action:
        got = [(c["name"], c["arguments"]) for c in action["tool_calls"]]
        assert got == [(name, args) for name, args in sample.calls]
        # arguments follow the schema's property order
        tools = {t.name: t for t in sample.tools}
        for name, args in got:
            order = list(tools[name].parameters["properties"])
            assert list(args) == [k for k in order if k in args]
        user = [m.content for m in sample.messages if m.role == "user"][-1]
        for surface in sample.copied:
            assert surface in user, (surface, user)
    elif sample.output is not None:
        assert action["final"] == sample.output
    else:
        assert action["final"] == sample.final


def test_every_training_target_is_a_valid_action(train_samples: list[Sample]) -> None:
    for sample in train_samples:
        _check(sample)


def test_every_heldout_target_is_a_valid_action(heldout_samples: list[Sample]) -> None:
    for sample in heldout_samples:
        _check(sample)


def test_the_corpus_covers_every_kind_and_domain(train_samples: list[Sample]) -> None:
    kinds = {"call", "parallel", "final", "no_tool", "chain", "made_up"}
    assert {s.kind for s in train_samples} == kinds
    assert {s.domain for s in train_samples} == {"support", "itops", "general"}
    assert any(len(s.calls) == 2 for s in train_samples)
    counts = {len(s.tools) for s in train_samples if s.kind == "call"}
    assert min(counts) == 2 and max(counts) >= 7


def test_final_answers_after_a_tool_quote_its_result(train_samples: list[Sample]) -> None:
    finals = [s for s in train_samples if s.kind == "final"]
    assert finals
    for s in finals:
        result = json.loads(s.messages[-1].content)
        values = [str(v) for v in result.values() if not isinstance(v, (list, dict, bool))]
        assert s.final is not None and any(v in s.final for v in values), (s.final, result)


def test_prompt_ends_at_the_assistant_turn(train_samples: list[Sample]) -> None:
    assert all(s.prompt().endswith(ASSISTANT) for s in train_samples)


def test_same_seed_same_corpus() -> None:
    a = [s.prompt() + s.target for s in CorpusGenerator("train", 7).samples(30)]
    b = [s.prompt() + s.target for s in CorpusGenerator("train", 7).samples(30)]
    c = [s.prompt() + s.target for s in CorpusGenerator("train", 8).samples(30)]
    assert a == b and a != c


def test_split_pool_partitions_every_pool() -> None:
    for pool in (list(range(2)), list(range(3)), list(range(8)), list(range(9))):
        train, held = split_pool(pool, "train"), split_pool(pool, "heldout")
        assert train and held and not set(train) & set(held)
        assert sorted(train + held) == pool
    for concept in ALL_CONCEPTS:
        assert not set(split_pool(concept.requests, "train")) & set(
            split_pool(concept.requests, "heldout")
        )


def test_heldout_requests_use_unseen_templates_and_tool_names(
    train_samples: list[Sample], heldout_samples: list[Sample]
) -> None:
    train_names = {t.name for s in train_samples for t in s.tools}
    called = [name for s in heldout_samples for name, _ in s.calls]
    unseen = [n for n in called if n not in train_names]
    assert len(unseen) >= 0.9 * len(called)


def test_unknown_split_is_refused() -> None:
    with pytest.raises(ValueError, match="split"):
        CorpusGenerator("test", 0)  # type: ignore[arg-type]


def _names(samples: list[Sample]) -> tuple[set[str], set[str]]:
    tools = {t.name for s in samples for t in s.tools}
    keys = {k for s in samples for t in s.tools for k in t.parameters["properties"]}
    return tools, keys


def _known_keys(keys: set[str]) -> set[str]:
    """Parameter names from the concepts' pools, the unused extras and the fallback ``*_arg``."""
    pools = {k for c in ALL_CONCEPTS for p in c.params for k in p.keys}
    extras = {name for name, _ in EXTRA_PARAMS}
    return pools | extras | {k for k in keys if k.endswith("_arg")}


def test_training_split_hides_some_names_so_they_cannot_be_memorized(
    train_samples: list[Sample],
) -> None:
    tools, keys = _names(train_samples)
    made_up_keys = keys - _known_keys(keys)
    assert len(made_up_keys) >= 20  # generic ("arg2") or made up ("tresami")
    # some tool names carry no pool verb: a generic or made-up verb, or a made-up name
    verbs = {v.replace("_", "") for c in ALL_CONCEPTS for v in c.verbs}
    bare = [n for n in tools if not any(v in n.lower().replace("_", "") for v in verbs)]
    assert len(bare) >= 0.1 * len(tools)


def test_heldout_split_is_not_perturbed(heldout_samples: list[Sample]) -> None:
    _, keys = _names(heldout_samples)
    assert keys <= _known_keys(keys)


def test_without_augmentation_training_uses_pool_names_only() -> None:
    plain = CorpusGenerator("train", 0, augmentation=augment.NONE)
    _, keys = _names(list(plain.samples(200)))
    assert keys <= _known_keys(keys)


def test_made_up_words_never_collide_with_pool_words() -> None:
    rng = random.Random(0)
    pool_keys = {k for c in ALL_CONCEPTS for p in c.params for k in p.keys}
    verbs = {v for c in ALL_CONCEPTS for v in c.verbs}
    assert not {opaque_key(rng, pool_keys, set()) for _ in range(500)} & pool_keys
    assert not {opaque_verb(rng, verbs) for _ in range(500)} & verbs


def test_dropping_words_keeps_the_spacing_and_never_empties_a_literal() -> None:
    assert drop_words(" order ", random.Random(0), 1.0) == " order "
    kept = drop_words("where is my order now", random.Random(1), 0.5)
    assert kept and set(kept.split()) <= {"where", "is", "my", "order", "now"}
    assert "  " not in kept


def test_made_up_tools_are_chosen_by_their_own_words(train_samples: list[Sample]) -> None:
    made_up = [s for s in train_samples if s.kind == "made_up"]
    assert len(made_up) >= 0.08 * len(train_samples)
    for s in made_up:
        said = set(re.findall(r"\w+", s.messages[-1].content.lower()))
        described = {
            t.name: set(
                re.findall(r"[A-Za-z][a-z]*", f"{t.name} {t.description}".replace("_", " "))
            )
            for t in s.tools
        }
        described = {n: {w.lower() for w in ws} for n, ws in described.items()}
        for name, _ in s.calls:
            others = set().union(*(w for n, w in described.items() if n != name))
            # the request uses a word of the called tool's name or description no other tool has
            assert (described[name] - others) & said, (name, s)


def test_made_up_tools_are_distractors_too() -> None:
    # Targets in made-up conversations, made-up names must also be tools nobody asked
    # for, or "call the unfamiliar name" becomes a shortcut on held-out tool lists.
    only = augment.Augmentation(0, 0, 0, 0, 0, 0, made_up_distractors=1.0)
    samples = list(CorpusGenerator("train", 0, augmentation=only).samples(120))
    pool_words = {w for c in ALL_CONCEPTS for w in (*c.verbs, *c.nouns)}
    seen = 0
    for sample in samples:
        _check(sample)
        for tool in sample.tools:
            name_words = {w.lower() for w in re.findall(r"[A-Za-z][a-z]*", tool.name)}
            if not name_words & pool_words:
                seen += 1
                assert tool.name not in {name for name, _ in sample.calls}
    assert seen >= len(samples)


def _results(samples: list[Sample]) -> list[dict]:
    return [
        json.loads(s.messages[-1].content)
        for s in samples
        if s.kind == "final" and s.messages[-1].role == "tool"
    ]


def test_reshaping_keeps_the_quoted_fields_and_adds_others() -> None:
    result = {"order_id": "58213", "status": "shipped", "total": 12.5, "items": 2}
    for seed in range(50):
        out = reshaped(random.Random(seed), result, ["order_id", "status"])
        assert out["order_id"] == "58213" and out["status"] == "shipped"
        assert 2 <= len(set(out) - set(result)) <= 6


def test_reshaped_training_results_vary_their_fields() -> None:
    # A lookup must be recognised by the tool that was called, not by the exact set
    # of fields its result happens to have.
    only = dataclasses.replace(augment.NONE, reshaped_results=1.0)
    shaped = _results(list(CorpusGenerator("train", 0, only).samples(300)))
    plain = _results(list(CorpusGenerator("train", 0, augment.NONE).samples(300)))
    known = {key for key, _ in EXTRA_FIELDS}
    assert len(shaped) >= 30
    new_shapes = {frozenset(r) for r in shaped} - {frozenset(r) for r in plain}
    assert len(new_shapes) >= 0.5 * len(shaped)
    plain_keys = {k for r in plain for k in r}
    wider = [r for r in shaped if set(r) - known - plain_keys]
    assert len(wider) >= 0.3 * len(shaped)


def test_more_extras_keep_the_quoted_fields_and_add_known_ones() -> None:
    result = {"order_id": "58213", "status": "shipped", "total": 12.5, "items": 2}
    known = {key for key, _ in EXTRA_FIELDS}
    dropped = 0
    for seed in range(50):
        out = with_more_extras(random.Random(seed), result, ["order_id", "status"])
        assert out["order_id"] == "58213" and out["status"] == "shipped"
        assert 2 <= len(set(out) - set(result)) <= 5
        assert set(out) - set(result) <= known  # no field name the held-out split lacks
        dropped += "items" not in out
    assert 10 <= dropped <= 40


def test_more_extras_apply_to_training_results_only_when_asked() -> None:
    # A lookup must be answered from its row even when the row has many columns.
    more = dataclasses.replace(augment.NONE, more_extras=1.0)
    rich = _results(list(CorpusGenerator("train", 0, more).samples(300)))
    plain = _results(list(CorpusGenerator("train", 0, augment.NONE).samples(300)))
    known = {key for key, _ in EXTRA_FIELDS}
    assert len(rich) >= 30

    def mean_known(results: list[dict]) -> float:
        counts = [len(set(r) & known) for r in results if "error" not in r]
        return sum(counts) / len(counts)

    assert mean_known(rich) >= mean_known(plain) + 1.5
    assert augment.TRAINING.more_extras == 0  # the shipped line's corpus is unchanged


def test_more_parallel_turns_single_calls_into_parallel_ones() -> None:
    # A training mix for a drafter that ends call lists too early: more two-call
    # requests, every other kind as often as before.
    more = dataclasses.replace(augment.NONE, more_parallel=0.5)
    plain = Counter(s.kind for s in CorpusGenerator("train", 0, augment.NONE).samples(400))
    mixed = Counter(s.kind for s in CorpusGenerator("train", 0, more).samples(400))
    assert mixed["parallel"] >= plain["parallel"] + 0.3 * plain["call"]
    for kind in ("final", "no_tool", "chain"):
        assert abs(mixed[kind] - plain[kind]) <= 0.35 * plain[kind] + 5
    with pytest.raises(ValueError, match="more_parallel"):
        augment.from_setting({"more_parallel": 1.5})


def test_more_chains_turn_single_calls_into_refunds_that_look_the_order_up_first() -> None:
    # A training mix for models that refund at once when the request gives no amount:
    # more chain conversations, every other kind but single calls as often as before.
    more = dataclasses.replace(augment.NONE, more_chains=0.5)
    plain = Counter(s.kind for s in CorpusGenerator("train", 0, augment.NONE).samples(400))
    samples = list(CorpusGenerator("train", 0, more).samples(400))
    mixed = Counter(s.kind for s in samples)
    assert mixed["chain"] >= plain["chain"] + 0.3 * plain["call"]
    for kind in ("final", "no_tool", "parallel"):
        assert abs(mixed[kind] - plain[kind]) <= 0.35 * plain[kind] + 5
    lookups = [s for s in samples if s.kind == "chain" and len(s.messages) == 1]
    assert lookups  # the first step: one call, the look-up, whose id the request holds
    for s in lookups:
        assert len(s.calls) == 1 and s.copied[0] in s.messages[0].content
    assert augment.TRAINING.more_chains == 0  # the shipped line's corpus is unchanged


def test_more_connectors_join_parallel_requests_with_training_only_joiners() -> None:
    # The held-out third of CONNECTORS (" plus ", " and then ", ". ") stays unseen:
    # the extra joiners are a list apart, none of them a held-out one.
    from agentflow.engine.training import phrasing

    held = set(split_pool(phrasing.CONNECTORS, "heldout"))
    assert not held & set(phrasing.MORE_CONNECTORS)
    more = dataclasses.replace(augment.NONE, more_parallel=0.5, more_connectors=1.0)
    parallel = [s for s in CorpusGenerator("train", 0, more).samples(300) if s.kind == "parallel"]
    assert len(parallel) > 40
    joined = [any(j in s.messages[-1].content for j in phrasing.MORE_CONNECTORS) for s in parallel]
    assert sum(joined) >= 0.9 * len(parallel)


def test_the_heldout_split_never_changes() -> None:
    # Evaluation figures are only comparable across corpus versions if the held-out
    # conversations stay byte for byte the same; training-only perturbations must
    # draw nothing from the held-out generator. Change this hash only on purpose,
    # and say so in docs/models.md.
    digest = hashlib.sha256()
    for sample in CorpusGenerator("heldout", 0).samples(100):
        digest.update((sample.prompt() + sample.target).encode())
    assert digest.hexdigest() == "16c0fb7ba12be5e242bfd39530a882a3f30d94fe50a9c6c5fbb9c2d35bb990d3"


def _structured(split: str, seed: int, n: int) -> list[Sample]:
    base = augment.TRAINING if split == "train" else augment.NONE
    gen = CorpusGenerator(split, seed, dataclasses.replace(base, structured_finals=1.0))  # type: ignore[arg-type]
    return [s for s in gen.samples(n) if s.kind == "structured"]


def test_structured_answers_copy_the_result_into_an_object_the_prompt_describes() -> None:
    samples = _structured("train", 4, 300)
    assert len(samples) > 30
    for sample in samples:
        _check(sample)  # a valid action whose final is the expected object
        assert sample.output_schema is not None and sample.output is not None
        assert list(sample.output) == list(sample.output_schema["properties"])
        final_line = [ln for ln in sample.prompt().splitlines() if ln.startswith("final: {")]
        assert len(final_line) == 1
        result = json.loads([m.content for m in sample.messages if m.role == "tool"][-1])
        for key, value in sample.output.items():
            # each field is the answer sentence, an empty list, or one of the result's values
            assert value == sample.final or value == [] or value in result.values(), key
    enums = [p for s in samples for p in s.output_schema["properties"].values() if "enum" in p]  # type: ignore[union-attr]
    assert enums and all(not any(c.isdigit() for v in p["enum"] for c in v) for p in enums)


def test_structured_answers_name_their_fields_from_split_pools() -> None:
    from agentflow.engine.training.structured_finals import TEXT_KEYS

    def text_keys(samples: list[Sample]) -> set[str]:
        # the field that holds the answer sentence (a copied field keeps its result key)
        return {k for s in samples for k, v in (s.output or {}).items() if v == s.final}

    train, held = text_keys(_structured("train", 5, 300)), text_keys(_structured("heldout", 5, 300))
    assert held and train and not held & train
    assert held <= set(split_pool(TEXT_KEYS, "heldout"))


def test_structured_answers_stay_off_unless_asked() -> None:
    assert not any(s.kind == "structured" for s in CorpusGenerator("train", 1).samples(300))


def test_a_message_that_opens_with_a_value_keeps_its_case() -> None:
    # "auth-us-21 and mail-4 need a reboot" must not become "Auth-us-21 …" while the
    # call holds "auth-us-21": a value at the start of the message is as the user typed it.
    samples = [
        *CorpusGenerator("heldout", 777).samples(384),
        *CorpusGenerator("train", 3).samples(400),
    ]
    opening = 0
    for sample in samples:
        user = [m.content for m in sample.messages if m.role == "user"][-1]
        for _, args in sample.calls:
            for value in args.values():
                if isinstance(value, list) and all(isinstance(v, str) for v in value):
                    assert all(v in user for v in value), (value, user)
                    opening += user.lower().startswith(value[0].lower())
    assert opening >= 3


def test_the_unseen_split_asks_every_request_in_words_no_other_split_uses() -> None:
    from agentflow.engine.training.unseen_phrasings import UNSEEN_REQUESTS

    for concept in ALL_CONCEPTS:
        unseen = UNSEEN_REQUESTS[concept.key]
        assert len(unseen) >= 4 and not set(unseen) & set(concept.requests)
        slots = {p.role for p in concept.params if p.required}
        for template in unseen:
            assert set(re.findall(r"\{(\w+)\}", template)) == slots, template
    samples = list(CorpusGenerator("unseen", 3).samples(120))
    for sample in samples:
        _check(sample)
    heldout = [s.prompt() for s in CorpusGenerator("heldout", 3).samples(120)]
    assert [s.prompt() for s in samples] != heldout
    with pytest.raises(ValueError, match="unseen"):
        CorpusGenerator("fresh", 0)  # type: ignore[arg-type]
