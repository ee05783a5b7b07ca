"""``agentflow generate`` on tiny checkpoints written by the test."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
from tokenizers import Tokenizer as HFTokenizer
from tokenizers import decoders, models, pre_tokenizers, trainers

from agentflow.cli import main
from agentflow.engine.chat_template import SPECIAL_TOKENS
from agentflow.engine.checkpoints import save_checkpoint
from agentflow.engine.model import ModelConfig, Transformer
from agentflow.engine.tokenizer import Tokenizer


@pytest.fixture(autouse=True)
def single_thread() -> Iterator[None]:
    """Tiny models run several times faster on one thread than on two contended ones."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def tokenizer() -> Tokenizer:
    hf = HFTokenizer(models.BPE())
    hf.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    hf.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=300,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    hf.train_from_iterator(["Where is order 58213?", '{"final":"ok"}'], trainer)
    return Tokenizer(hf)


def _checkpoint(folder: Path, tokenizer: Tokenizer, attention: str) -> Path:
    config = ModelConfig(
        vocab_size=tokenizer.vocab_size, dim=32, n_layers=2, n_heads=4, n_kv_heads=2, ffn_dim=64,
        max_seq_len=128, attention=attention, block_length=8, mask_token_id=1, end_token_id=2,
        pad_token_id=0, tie_embeddings=False,
    )  # type: ignore[arg-type]  # fmt: skip
    torch.manual_seed(0)
    model = Transformer(config)
    model.init_weights(0)
    return save_checkpoint(model, tokenizer, folder)


@pytest.fixture(scope="module")
def dlm(tmp_path_factory: pytest.TempPathFactory, tokenizer: Tokenizer) -> Path:
    return _checkpoint(tmp_path_factory.mktemp("dlm"), tokenizer, "block")


@pytest.fixture(scope="module")
def arm(tmp_path_factory: pytest.TempPathFactory, tokenizer: Tokenizer) -> Path:
    return _checkpoint(tmp_path_factory.mktemp("ar"), tokenizer, "causal")


def run_json(capsys: pytest.CaptureFixture[str], *argv: str) -> dict:
    assert main(["generate", *argv, "--json"]) == 0
    out = capsys.readouterr().out
    assert out.count("\n") == 1  # exactly one object
    return json.loads(out)


@pytest.mark.parametrize("extra", [(), ("--cache-block-prefix",)])
def test_json_output_shape_and_determinism(
    dlm: Path, capsys: pytest.CaptureFixture[str], extra: tuple[str, ...]
) -> None:
    args = (
        "Where is order 58213?",
        "--model",
        str(dlm),
        "--max-new-tokens",
        "16",
        "--block-length",
        "8",
        *extra,
    )
    first = run_json(capsys, *args)
    assert set(first) == {"text", "stats"}
    stats = first["stats"]
    assert set(stats) == {"tokens", "nfe", "forced_tokens", "seconds", "mode"}
    assert stats["mode"] == "diffusion" and isinstance(first["text"], str)
    assert 0 < stats["tokens"] <= 16 and 1 <= stats["nfe"] <= 16
    assert isinstance(stats["seconds"], float) and stats["forced_tokens"] == 0
    assert run_json(capsys, *args)["text"] == first["text"]


def test_fixed_steps_bound_the_forward_passes(
    dlm: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = run_json(
        capsys, "hi", "--model", str(dlm), "--max-new-tokens", "16", "--block-length", "8",
        "--steps", "2", "--threshold", "-1",
    )  # fmt: skip
    assert out["stats"]["nfe"] <= 4


def test_ar_mode_is_the_default_for_causal_checkpoints(
    arm: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = run_json(capsys, "hi", "--model", str(arm), "--max-new-tokens", "5")
    assert out["stats"]["mode"] == "ar" and out["stats"]["tokens"] <= 5


def test_plain_output_streams_text(dlm: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["generate", "hi", "--model", str(dlm), "--max-new-tokens", "8", "--raw"]) == 0
    captured = capsys.readouterr()
    assert captured.out.endswith("\n") and "forward passes" in captured.err


def test_errors(dlm: Path, arm: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["generate", "hi", "--model", str(tmp_path / "missing")]) == 1
    assert "missing" in capsys.readouterr().err
    assert (
        main(["generate", "hi", "--model", str(dlm), "--schema", str(tmp_path / "none.json")]) == 2
    )
    assert "none.json" in capsys.readouterr().err
    assert main(["generate", "hi", "--model", str(arm), "--mode", "diffusion"]) == 2
    assert "causal" in capsys.readouterr().err
    assert main(["generate", "x " * 200, "--model", str(dlm), "--raw"]) == 1
    assert "ContextLengthError" in capsys.readouterr().err
    assert main(["generate", "hi", "--model", str(dlm), "--block-length", "0"]) == 2


def test_hybrid_mode_dispatches_to_the_hybrid_engine(
    dlm: Path, arm: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["generate", "hi", "--model", str(dlm), "--mode", "hybrid", "--verifier", str(arm)]
    out = run_json(capsys, *argv[1:], "--max-new-tokens", "8")
    assert out["stats"]["tokens"] <= 8 and out["stats"]["nfe"] >= 1


def test_schema_constrains_the_output(
    dlm: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    schema = {
        "type": "object",
        "properties": {"ok": {"type": "boolean"}},
        "required": ["ok"],
        "additionalProperties": False,
    }
    path = tmp_path / "schema.json"
    path.write_text(json.dumps(schema))
    argv = ["generate", "hi", "--model", str(dlm), "--schema", str(path), "--max-new-tokens", "16"]
    out = run_json(capsys, *argv[1:])
    assert json.loads(out["text"]) in ({"ok": True}, {"ok": False})
    assert out["stats"]["forced_tokens"] > 0  # '{"ok":' is forced by the schema


@pytest.mark.parametrize(("flag", "expected"), [((), False), (("--score-choices",), True)])
def test_score_choices_flag_reaches_the_config(flag: tuple[str, ...], expected: bool) -> None:
    from agentflow.cli import build_parser
    from agentflow.cli.generate import _config

    args = build_parser().parse_args(["generate", "hi", *flag])
    assert _config(args).score_choices is expected


@pytest.mark.parametrize(("flag", "expected"), [((), None), (("--text-threshold", "0.99"), 0.99)])
def test_text_threshold_flag_reaches_the_config(
    flag: tuple[str, ...], expected: float | None
) -> None:
    from agentflow.cli import build_parser
    from agentflow.cli.generate import _config

    args = build_parser().parse_args(["generate", "hi", *flag])
    assert _config(args).text_threshold == expected


def test_an_out_of_range_text_threshold_is_a_clear_error() -> None:
    from agentflow.cli import CLIError, build_parser
    from agentflow.cli.generate import _config

    args = build_parser().parse_args(["generate", "hi", "--text-threshold", "2"])
    with pytest.raises(CLIError, match="text_threshold"):
        _config(args)


def test_copy_offers_the_prompts_spans_to_string_values(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    schema = {
        "type": "object",
        "properties": {"order_id": {"type": "string"}},
        "required": ["order_id"],
        "additionalProperties": False,
    }
    path = tmp_path / "order.json"
    path.write_text(json.dumps(schema))
    prompt = "Where is my order 58213?"
    argv = [prompt, "--schema", str(path), "--score-choices", "--block-length", "16"]
    assert set(json.loads(run_json(capsys, *argv, "--copy")["text"])) == {"order_id"}
    # Every copy choice taken: the value is then a span of the prompt.
    import agentflow.engine.choice_scoring as choice_scoring
    from agentflow.engine.constraints.copy_choices import request_spans

    monkeypatch.setattr(choice_scoring, "COPY_MIN_CLOSE", 0.0)
    value = json.loads(run_json(capsys, *argv, "--copy")["text"])["order_id"]
    assert value in request_spans([prompt])

    from agentflow.cli.generate import _schema_constraint
    from agentflow.engine.checkpoints import load_checkpoint

    loaded = load_checkpoint(None)
    session = _schema_constraint(path, loaded, 32, copy_from=[prompt])
    assert "58213" in session.copy_spans  # type: ignore[attr-defined]
    assert not _schema_constraint(path, loaded, 32).copy_spans  # type: ignore[attr-defined]
    assert not session.word_spans  # type: ignore[attr-defined]
    within = _schema_constraint(path, loaded, 32, copy_from=[prompt], copy_within_text=True)
    assert "58213" in within.word_spans  # type: ignore[attr-defined]
    text = run_json(capsys, *argv, "--copy", "--copy-within-text")["text"]
    assert set(json.loads(text)) == {"order_id"}
