"""Training loop: a few steps on a micro model learn, checkpoint, resume exactly, export and load."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import pytest
import torch

from agentflow.engine.checkpoints import load_checkpoint
from agentflow.engine.model import Transformer
from agentflow.engine.tokenizer import Tokenizer
from agentflow.engine.training import augment
from agentflow.engine.training.config import TrainConfig
from agentflow.engine.training.train import (
    START_WEIGHTS,
    batch_order,
    export,
    init_weights_from,
    lr_at,
    train,
)


def _config(tmp: Path, tokenizer: Path, objective: str, out: str) -> TrainConfig:
    raw: dict[str, Any] = {
        "name": f"micro-{objective}",
        "objective": objective,
        "model": {
            "vocab_size": 512,
            "dim": 32,
            "n_layers": 2,
            "n_heads": 4,
            "n_kv_heads": 2,
            "ffn_dim": 64,
            "attention": "block" if objective == "diffusion" else "causal",
            "block_length": 8,
        },
        "out_dir": str(tmp / out),
        "export_dir": str(tmp / f"{out}-export"),
        "tokenizer": {"path": str(tokenizer)},
        "data": {"train_samples": 24, "heldout_samples": 4, "seed": 0, "max_len": 1024},
        "optim": {
            "batch_size": 2,
            "max_steps": 3,
            "warmup_steps": 1,
            "lr": 3e-3,
            "block_lengths": [4, 8],
        },
    }
    return TrainConfig.from_dict(raw)


def _trained(tmp: Path, tokenizer: Path, objective: str, out: str) -> Path:
    """A micro model trained one step and exported: a checkpoint to start a run from."""
    config = _config(tmp, tokenizer, objective, out)
    train(config, progress=False, max_steps=1)
    return export(config)


@pytest.mark.parametrize("objective", ["diffusion", "autoregressive"])
def test_three_steps_train_checkpoint_and_export(
    tmp_path: Path, small_tokenizer_path: Path, objective: str
) -> None:
    config = _config(tmp_path, small_tokenizer_path, objective, "run")
    losses: list[float] = []
    result = train(config, progress=False, on_step=lambda step, loss: losses.append(loss))
    assert result.steps == 3 and len(losses) == 3
    assert all(torch.isfinite(torch.tensor(losses)))
    assert (tmp_path / "run" / "last.pt").is_file() and (tmp_path / "run" / "best.pt").is_file()
    metrics = [
        json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()
    ]
    assert metrics[-1]["step"] == 3

    dest = export(config)
    loaded = load_checkpoint(dest)
    assert loaded.format == "agentflow"
    assert loaded.config.attention == config.model.attention
    assert loaded.config.mask_token_id == 1 and loaded.config.end_token_id == 2
    assert {p.name for p in dest.iterdir()} >= {
        "config.json",
        "model.safetensors",
        "tokenizer.json",
    }
    state = torch.load(tmp_path / "run" / "last.pt", weights_only=False)["model"]
    for name, tensor in loaded.model.state_dict().items():
        torch.testing.assert_close(tensor, state[name].to(torch.float16).float())


def test_export_elsewhere_records_where_the_copy_lives(
    tmp_path: Path, small_tokenizer_path: Path
) -> None:
    config = _config(tmp_path, small_tokenizer_path, "diffusion", "run")
    train(config, progress=False)
    dest = export(config, dest=tmp_path / "shipped")
    meta = json.loads((dest / "training.json").read_text())
    assert meta["training_config"]["export_dir"] == str(tmp_path / "shipped")
    assert meta["training_config"]["out_dir"] == config.out_dir
    assert meta["steps"] == 3


def test_resume_continues_exactly_where_the_checkpoint_left_off(
    tmp_path: Path, small_tokenizer_path: Path
) -> None:
    straight = _config(tmp_path, small_tokenizer_path, "diffusion", "straight")
    train(straight, progress=False)
    split = _config(tmp_path, small_tokenizer_path, "diffusion", "split")
    first = train(split, progress=False, max_steps=2)
    assert first.steps == 2
    resumed = train(split, progress=False)
    assert resumed.steps == 3
    a = torch.load(tmp_path / "straight" / "last.pt", weights_only=False)["model"]
    b = torch.load(tmp_path / "split" / "last.pt", weights_only=False)["model"]
    for name in a:
        torch.testing.assert_close(a[name], b[name])


def test_schedule_warms_up_then_decays_to_the_floor(
    tmp_path: Path, small_tokenizer_path: Path
) -> None:
    config = _config(tmp_path, small_tokenizer_path, "diffusion", "s")
    config.optim.max_steps, config.optim.warmup_steps = 100, 10
    lrs = [lr_at(s, config) for s in range(101)]
    assert lrs[0] < lrs[9] == pytest.approx(config.optim.lr)
    assert all(x >= y for x, y in itertools.pairwise(lrs[10:]))
    assert lrs[100] == pytest.approx(config.optim.lr * config.optim.min_lr_ratio)


def test_batches_group_similar_lengths_and_cover_the_data() -> None:
    lengths = [
        int(x) for x in torch.randint(10, 400, (1000,), generator=torch.Generator().manual_seed(0))
    ]
    order = batch_order(lengths, 8, seed=0, epoch=0)
    assert sorted(i for b in order for i in b) == list(range(1000))
    spread = sum(max(lengths[i] for i in b) - min(lengths[i] for i in b) for b in order) / len(
        order
    )
    assert spread < 40
    assert (
        order
        == batch_order(lengths, 8, seed=0, epoch=0)
        != batch_order(lengths, 8, seed=0, epoch=1)
    )


def test_bad_configs_are_refused_with_the_problem_named(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="objective"):
        TrainConfig.from_dict(
            {"name": "x", "objective": "gan", "model": {}, "out_dir": "o", "export_dir": "e"}
        )
    with pytest.raises(ValueError, match="missing"):
        TrainConfig.from_dict({"name": "x"})
    with pytest.raises(FileNotFoundError):
        TrainConfig.load(tmp_path / "nope.json")


def test_shipped_configs_parse() -> None:
    root = Path(__file__).resolve().parents[3] / "engine" / "training" / "configs"
    names = sorted(p.name for p in root.glob("*.json"))
    assert "tiny-ar-stage5.json" in names
    for name in names:
        config = TrainConfig.load(root / name)
        assert config.model.vocab_size == config.tokenizer.vocab_size


def test_augment_settings_are_checked_when_the_config_loads() -> None:
    model = {"vocab_size": 64, "dim": 16, "n_layers": 1, "n_heads": 2, "n_kv_heads": 1}
    base = {"name": "x", "objective": "autoregressive", "out_dir": "o", "export_dir": "e"}
    base["model"] = {**model, "ffn_dim": 32}
    config = TrainConfig.from_dict({**base, "data": {"augment": {"made_up_distractors": 0}}})
    chosen = augment.from_setting(config.data.augment)
    assert chosen.made_up_distractors == 0
    assert chosen.opaque_verb == augment.TRAINING.opaque_verb
    assert augment.from_setting(False) == augment.NONE
    with pytest.raises(ValueError, match=r"unknown augment keys.*made_up_distractor"):
        TrainConfig.from_dict({**base, "data": {"augment": {"made_up_distractor": 0}}})
    with pytest.raises(ValueError, match="opaque_verb must be a probability"):
        TrainConfig.from_dict({**base, "data": {"augment": {"opaque_verb": 1.5}}})


def test_a_run_can_start_from_a_shipped_checkpoint(
    tmp_path: Path, small_tokenizer_path: Path
) -> None:
    source = _config(tmp_path, small_tokenizer_path, "diffusion", "source")
    train(source, progress=False)
    shipped = export(source)

    follow = _config(tmp_path, small_tokenizer_path, "diffusion", "follow")
    follow.init_from = str(shipped)
    model = Transformer(follow.model)
    init_weights_from(model, follow.init_from, Tokenizer.from_file(small_tokenizer_path))
    for name, tensor in load_checkpoint(shipped).model.state_dict().items():
        torch.testing.assert_close(model.state_dict()[name], tensor)
    assert train(follow, progress=False, max_steps=1).steps == 1

    wider = _config(tmp_path, small_tokenizer_path, "diffusion", "wider")
    wider.model.dim = 64
    with pytest.raises(ValueError, match="architecture differs"):
        init_weights_from(
            Transformer(wider.model), str(shipped), Tokenizer.from_file(small_tokenizer_path)
        )
    with pytest.raises(ValueError, match="top-level keys"):
        TrainConfig.from_dict({**source.to_dict(), "init_form": "typo"})


def test_a_deeper_model_grows_from_a_trained_one_and_starts_as_it(
    tmp_path: Path, small_tokenizer_path: Path
) -> None:
    shipped = _trained(tmp_path, small_tokenizer_path, "diffusion", "source")
    raw = _config(tmp_path, small_tokenizer_path, "diffusion", "deeper").to_dict()
    raw["model"]["n_layers"] = 3
    deeper = TrainConfig.from_dict({**raw, "init_from": str(shipped), "init_grow": True})
    tok = Tokenizer.from_file(small_tokenizer_path)
    model = Transformer(deeper.model)
    init_weights_from(model, str(shipped), tok, grow=True)
    small = load_checkpoint(shipped).model
    ids = torch.randint(3, 500, (2, 24))
    with torch.no_grad():  # the inserted layer adds nothing: the same function
        torch.testing.assert_close(model(ids), small(ids))
    assert not torch.equal(model.layers[2].attention.wq.weight, torch.zeros(1))
    assert torch.count_nonzero(model.layers[2].feed_forward.w2.weight) == 0
    assert train(deeper, progress=False, max_steps=1).steps == 1
    assert (
        torch.count_nonzero(
            torch.load(tmp_path / "deeper" / "last.pt")["model"]["layers.2.feed_forward.w2.weight"]
        )
        > 0
    )  # and training gives it work

    with pytest.raises(ValueError, match="architecture differs"):  # growth is asked for
        init_weights_from(Transformer(deeper.model), str(shipped), tok)
    raw["model"]["n_layers"] = 5
    with pytest.raises(ValueError, match="at most twice as many"):
        init_weights_from(Transformer(TrainConfig.from_dict(raw).model), str(shipped), tok, True)
    with pytest.raises(ValueError, match="needs init_from"):
        TrainConfig.from_dict({**raw, "init_grow": True})


def test_export_mix_ships_the_point_between_the_start_and_the_trained_weights(
    tmp_path: Path, small_tokenizer_path: Path
) -> None:
    source = _config(tmp_path, small_tokenizer_path, "diffusion", "source")
    train(source, progress=False, max_steps=1)
    start = load_checkpoint(export(source)).model.state_dict()

    raw = _config(tmp_path, small_tokenizer_path, "diffusion", "mixed").to_dict()
    mixed = TrainConfig.from_dict({**raw, "init_from": str(source.export_dir), "export_mix": 0.5})
    train(mixed, progress=False)
    trained = torch.load(tmp_path / "mixed" / "last.pt", weights_only=False)["model"]
    # A chained run exports over the folder it started from; the start is kept apart.
    (Path(source.export_dir) / "model.safetensors").unlink()
    shipped = export(mixed)
    weights = load_checkpoint(shipped).model.state_dict()
    moved = 0
    for name, tensor in weights.items():
        midpoint = start[name] + 0.5 * (trained[name] - start[name])  # the documented mix
        torch.testing.assert_close(tensor, midpoint.half().float())
        moved += int(not torch.equal(start[name], trained[name]))
    assert moved > 0  # training changed the weights, so the midpoint is a third point
    assert json.loads((shipped / "training.json").read_text())["export_mix"] == 0.5

    # A later run in the chain may mix with this run's start instead of its own.
    later = TrainConfig.from_dict(
        {
            **_config(tmp_path, small_tokenizer_path, "diffusion", "later").to_dict(),
            "init_from": str(shipped),
            "export_mix": 0.5,
            "export_mix_from": str(tmp_path / "mixed" / START_WEIGHTS),
        }
    )
    train(later, progress=False, max_steps=1)
    last = torch.load(tmp_path / "later" / "last.pt", weights_only=False)["model"]
    chained = load_checkpoint(export(later)).model.state_dict()
    for name, tensor in chained.items():
        expected = start[name] + 0.5 * (last[name] - start[name])
        torch.testing.assert_close(tensor, expected.half().float())

    (tmp_path / "mixed" / START_WEIGHTS).unlink()
    with pytest.raises(FileNotFoundError, match=START_WEIGHTS):
        export(mixed)


def test_export_mix_is_checked_when_the_config_loads(
    tmp_path: Path, small_tokenizer_path: Path
) -> None:
    raw = _config(tmp_path, small_tokenizer_path, "diffusion", "run").to_dict()
    with pytest.raises(ValueError, match="needs init_from"):
        TrainConfig.from_dict({**raw, "export_mix": 0.5})
    for bad in (0.0, 1.5):
        with pytest.raises(ValueError, match=r"export_mix must be in \(0, 1\]"):
            TrainConfig.from_dict({**raw, "init_from": "x", "export_mix": bad})
    assert TrainConfig.from_dict(raw).export_mix == 1.0


def test_a_shifted_drafter_starts_from_an_ar_export_and_keeps_its_commit_order(
    tmp_path: Path, small_tokenizer_path: Path
) -> None:
    """The embedded drafter's recipe: block diffusion with logits_shift=1 from AR weights."""
    ar_export = _trained(tmp_path, small_tokenizer_path, "autoregressive", "ar")

    drafter = _config(tmp_path, small_tokenizer_path, "diffusion", "drafter")
    drafter.init_from = str(ar_export)
    drafter.model.logits_shift = 1
    drafter.model.commit_order = "prefix"
    assert train(drafter, progress=False, max_steps=2).steps == 2
    shipped = load_checkpoint(export(drafter))
    assert shipped.config.attention == "block"
    assert (shipped.config.logits_shift, shipped.config.commit_order) == (1, "prefix")


def test_position_gap_settings_are_checked_when_the_config_loads() -> None:
    model = {"vocab_size": 64, "dim": 16, "n_layers": 1, "n_heads": 2, "n_kv_heads": 1}
    base = {"name": "x", "out_dir": "o", "export_dir": "e", "model": {**model, "ffn_dim": 32}}
    ar = {**base, "objective": "autoregressive"}
    config = TrainConfig.from_dict({**ar, "optim": {"position_gap": 512, "gap_rate": 0.5}})
    assert (config.optim.position_gap, config.optim.gap_rate) == (512, 0.5)
    with pytest.raises(ValueError, match="gap_rate in"):
        TrainConfig.from_dict({**ar, "optim": {"position_gap": 512, "gap_rate": 2}})
    with pytest.raises(ValueError, match="position_gap must be >= 0"):
        TrainConfig.from_dict({**base, "objective": "diffusion", "optim": {"position_gap": -8}})


def test_long_samples_put_earlier_exchanges_in_front_of_a_share_of_the_training_split(
    small_tokenizer: Tokenizer,
) -> None:
    from agentflow.engine.training.train import build_examples

    plain = build_examples(small_tokenizer, "train", 40, 3, 4096)
    longer = build_examples(
        small_tokenizer, "train", 40, 3, 4096, long_rate=0.5, long_min_tokens=700
    )
    assert len(plain) == len(longer) == 40
    stretched = [(a, b) for a, b in zip(plain, longer, strict=True) if a.prompt != b.prompt]
    assert 8 <= len(stretched) <= 32  # about half, drawn with the seed
    for a, b in stretched:
        assert len(b.prompt) >= 700 > len(a.prompt)
        assert b.target == a.target  # the case itself, its answer unchanged
    assert longer == build_examples(
        small_tokenizer, "train", 40, 3, 4096, long_rate=0.5, long_min_tokens=700
    )

    model = {"vocab_size": 64, "dim": 16, "n_layers": 1, "n_heads": 2, "n_kv_heads": 1}
    base = {"name": "x", "out_dir": "o", "export_dir": "e", "objective": "autoregressive"}
    raw = {**base, "model": {**model, "ffn_dim": 32}}
    data = {"max_len": 1400, "long_rate": 0.4, "long_min_tokens": 1100}
    assert TrainConfig.from_dict({**raw, "data": data}).data.long_rate == 0.4
    with pytest.raises(ValueError, match="long_rate must be in"):
        TrainConfig.from_dict({**raw, "data": {**data, "long_rate": 1.5}})
    with pytest.raises(ValueError, match="long_min_tokens must be in"):
        TrainConfig.from_dict({**raw, "data": {**data, "long_min_tokens": 1400}})
