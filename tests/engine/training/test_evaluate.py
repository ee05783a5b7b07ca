"""Held-out scoring: what counts as a right tool, exact arguments, valid JSON, a grounded answer."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import torch

from agentflow.engine.chat_template import ChatMessage, ToolSpec, format_final, format_tool_calls
from agentflow.engine.checkpoints import load_checkpoint, save_checkpoint
from agentflow.engine.constraints import action_schema
from agentflow.engine.generation import GenerationConfig
from agentflow.engine.model import ModelConfig, Transformer
from agentflow.engine.tokenizer import Tokenizer
from agentflow.engine.training.corpus import Sample
from agentflow.engine.training.evaluate import evaluate, format_table, score, summarize

TOOLS = (
    ToolSpec(
        "get_order",
        "Look up an order",
        {
            "type": "object",
            "properties": {"order_id": {"type": "string"}},
            "required": ["order_id"],
        },
    ),
    ToolSpec(
        "check_disk",
        "Disk usage",
        {"type": "object", "properties": {"host": {"type": "string"}}, "required": ["host"]},
    ),
)
CALL = Sample(
    TOOLS,
    (ChatMessage("user", "where is order 58213?"),),
    format_tool_calls([("get_order", {"order_id": "58213"})]),
    "support",
    "call",
    calls=(("get_order", {"order_id": "58213"}),),
)
FINAL = Sample(
    TOOLS,
    (
        ChatMessage("user", "where is order 58213?"),
        ChatMessage("assistant", format_tool_calls([("get_order", {"order_id": "58213"})])),
        ChatMessage("tool", '{"order_id":"58213","status":"shipped"}', name="get_order"),
    ),
    format_final("Order 58213 is shipped."),
    "support",
    "final",
    final="Order 58213 is shipped.",
)


def _score(sample: Sample, text: str) -> dict[str, object]:
    return score(sample, text, action_schema(list(sample.tools), None))


def test_the_expected_call_scores_right() -> None:
    got = _score(CALL, CALL.target)
    assert got["valid_json"] and got["tool_choice"] and got["exact_args"]


def test_right_tool_wrong_argument_is_not_exact() -> None:
    got = _score(CALL, format_tool_calls([("get_order", {"order_id": "58231"})]))
    assert got["tool_choice"] and not got["exact_args"]


def test_wrong_tool_and_broken_json() -> None:
    assert not _score(CALL, format_tool_calls([("check_disk", {"host": "58213"})]))["tool_choice"]
    broken = _score(CALL, '{"tool_calls":[{"name":"get_order"')
    assert not broken["valid_json"] and not broken["tool_choice"]
    # valid JSON that breaks the action schema is not valid
    assert not _score(CALL, '{"tool_calls":[{"name":"nope","arguments":{}}]}')["valid_json"]


def test_a_final_answer_is_grounded_when_it_quotes_the_result() -> None:
    assert _score(FINAL, FINAL.target)["grounded_final"] is True
    assert _score(FINAL, format_final("All good!"))["grounded_final"] is False
    assert _score(FINAL, FINAL.target)["final_choice"] is True


def test_a_faithful_answer_quotes_every_value_the_reference_uses() -> None:
    assert _score(FINAL, FINAL.target)["faithful_final"] is True
    # quotes the order id but misreads the status: grounded, not faithful
    wrong = _score(FINAL, format_final("Order 58213 has been cancelled."))
    assert wrong["grounded_final"] is True and wrong["faithful_final"] is False
    # a value inside a longer word does not count
    assert _score(FINAL, format_final("Order 582134 is shipped."))["faithful_final"] is False


STRUCTURED = dataclasses.replace(
    FINAL,
    target=format_final({"status": "shipped", "summary": "Order 58213 is shipped."}),
    kind="structured",
    output_schema={
        "type": "object",
        "properties": {"status": {"enum": ["shipped", "pending"]}, "summary": {"type": "string"}},
        "required": ["status", "summary"],
    },
    output={"status": "shipped", "summary": "Order 58213 is shipped."},
)


def test_a_structured_answer_is_scored_by_its_fields() -> None:
    schema = action_schema(list(STRUCTURED.tools), STRUCTURED.output_schema)
    right = score(STRUCTURED, STRUCTURED.target, schema)
    assert right["valid_json"] and right["structured_values"] and right["structured_exact"]
    # another sentence: the values are right, the object is not the expected one
    other = score(STRUCTURED, format_final({"status": "shipped", "summary": "Shipped!"}), schema)
    assert other["structured_values"] is True and other["structured_exact"] is False
    wrong = score(STRUCTURED, format_final({"status": "pending", "summary": "x"}), schema)
    assert wrong["structured_values"] is False and wrong["final_choice"] is True
    # a text answer where an object is expected is neither
    text = score(STRUCTURED, format_final("Order 58213 is shipped."), schema)
    assert text["structured_values"] is False and not text["valid_json"]
    # other kinds leave the structured metrics unset
    assert _score(FINAL, FINAL.target)["structured_values"] is None


def test_summary_and_table() -> None:
    from agentflow.engine.training.evaluate import CaseResult

    rows = [
        CaseResult(
            "diffusion", "support", "call", "", True, True, True, False, False, None, 0.01, 10, 5
        ),
        CaseResult(
            "diffusion", "itops", "call", "", True, True, True, True, False, None, 0.03, 10, 5
        ),
    ]
    summary = summarize(rows)
    assert summary["diffusion"]["all"]["tool_choice"] == 100.0
    assert summary["diffusion"]["all"]["exact_args"] == 50.0
    assert summary["diffusion"]["all"]["ms_per_step"] == 20.0
    assert summary["diffusion"]["all"]["tokens_per_forward"] == 2.0
    assert summary["diffusion"]["kind:call"]["exact_args"] == 50.0
    assert summary["diffusion"]["itops"]["exact_args"] == 100.0
    table = format_table(summary)
    assert "itops" in table and "kind:call" in table


@pytest.mark.slow
@pytest.mark.parametrize("constrained", [True, False])
def test_constrained_decoding_of_a_random_model_is_always_valid(
    tmp_path: Path, small_tokenizer: Tokenizer, constrained: bool
) -> None:
    cfg = ModelConfig(
        vocab_size=small_tokenizer.vocab_size,
        dim=32,
        n_layers=1,
        n_heads=2,
        n_kv_heads=1,
        ffn_dim=64,
        attention="block",
        block_length=16,
        mask_token_id=1,
        end_token_id=2,
        pad_token_id=0,
    )
    torch.manual_seed(0)
    model = Transformer(cfg)
    model.init_weights(0)
    loaded = load_checkpoint(save_checkpoint(model, small_tokenizer, tmp_path / "dlm"))
    report = evaluate(
        loaded,
        None,
        modes=("diffusion",),
        n=3,
        batch_size=3,
        constrained=constrained,
        config=GenerationConfig(max_new_tokens=96, block_length=16, steps=4),
        tool_relevance=7.0,  # the tool priors too: unconstrained runs have no session for them
        tool_similarity=20.0,
        answer_bonus=8.0,
    )
    assert len(report.cases) == 3
    assert report.settings["tool_similarity"] == 20.0
    if constrained:
        assert report.summary["diffusion"]["all"]["valid_json"] == 100.0
    assert len(report.cases) == 3


def test_train_split_cases_come_from_the_training_pools() -> None:
    from agentflow.engine.training.corpus import CorpusGenerator
    from agentflow.engine.training.evaluate import eval_cases

    train = eval_cases(4, seed=9, split="train")
    held = eval_cases(4, seed=9)
    assert [c.prompt() for c in train] == [
        c.prompt() for c in CorpusGenerator("train", 9).samples(4)
    ]
    assert [c.prompt() for c in train] != [c.prompt() for c in held]
    with pytest.raises(ValueError, match="split"):
        eval_cases(1, split="test")  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def shipped_pair() -> tuple[object, object]:
    """The embedded drafter and verifier (random weights never reach a tool call)."""
    return load_checkpoint("agentflow-tiny-dlm"), load_checkpoint("agentflow-tiny-ar")


@pytest.mark.slow
def test_hybrid_rows_equal_the_ar_rows_with_closed_choices(
    shipped_pair: tuple[object, object],
) -> None:
    # Both read the choice prior (on these cases its lift changes two tool names).
    dlm, ar = shipped_pair
    config = GenerationConfig(max_new_tokens=96, block_length=16, score_choices=True)
    report = evaluate(dlm, ar, modes=("ar", "hybrid"), n=8, seed=1, batch_size=8, config=config)
    by_mode = {m: [c.text for c in report.cases if c.mode == m] for m in ("ar", "hybrid")}
    assert by_mode["hybrid"] == by_mode["ar"]


@pytest.mark.slow
def test_auto_mode_reports_which_mode_served_each_case(
    shipped_pair: tuple[object, object],
) -> None:
    dlm, ar = shipped_pair
    config = GenerationConfig(max_new_tokens=96, block_length=16)
    report = evaluate(dlm, ar, modes=("auto",), n=4, seed=1, batch_size=4, config=config)
    served = [c.served for c in report.cases]
    assert len(served) == 4 and set(served) <= {"diffusion", "hybrid"}
    share = report.summary["auto"]["all"]["hybrid_served"]
    assert share == 100.0 * served.count("hybrid") / 4
    assert "hybrid_served" in format_table(report.summary)
