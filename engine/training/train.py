"""The training loop: data, optimizer, schedule, checkpoints, resume, export.

Deterministic from the config: the corpus is drawn from ``data.seed``, the batch
order from ``optim.seed`` and each step's noise from ``(optim.seed, step)``, so a
resumed run continues exactly where a checkpoint left off. A checkpoint
(``last.pt``) is written every ``checkpoint_minutes``; the one with the lowest
held-out loss is kept as ``best.pt``. Only scored positions go through the output
projection (``hidden_only`` + ``project``).
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
import random
import shutil
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from tqdm import tqdm

from ..checkpoints import load_checkpoint, save_checkpoint
from ..model import ModelConfig, Transformer
from ..tokenizer import Tokenizer
from . import augment
from .config import TrainConfig
from .corpus import CORPUS_VERSION, CorpusGenerator
from .growth import grown_state
from .long_prompts import lengthened
from .objectives import IGNORE, Batch, Example, autoregressive_batch, diffusion_batch
from .tokenizer_training import train_and_save

log = logging.getLogger(__name__)

#: In ``out_dir``: the weights a run started from (``init_from``), for ``export_mix``.
START_WEIGHTS = "init.pt"


@dataclass
class TrainResult:
    """What a finished (or stopped) run reports."""

    steps: int
    last_loss: float
    best_heldout_loss: float
    seconds: float
    out_dir: Path


def load_or_train_tokenizer(config: TrainConfig) -> Tokenizer:
    """The shared tokenizer; trained (deterministically) when its file is missing."""
    path = Path(config.tokenizer.path)
    if path.is_file():
        return Tokenizer.from_file(path)
    log.info("training tokenizer on %d samples -> %s", config.tokenizer.samples, path)
    tmp = path.with_suffix(f".{os.getpid()}.tmp.json")
    train_and_save(
        tmp,
        n_samples=config.tokenizer.samples,
        vocab_size=config.tokenizer.vocab_size,
        seed=config.tokenizer.seed,
    )
    os.replace(tmp, path)
    return Tokenizer.from_file(path)


def build_examples(
    tok: Tokenizer,
    split: str,
    n: int,
    seed: int,
    max_len: int,
    augmentation: augment.Augmentation | None = None,
    *,
    long_rate: float = 0.0,
    long_min_tokens: int = 0,
) -> list[Example]:
    """Tokenize ``n`` corpus samples of ``split``; drop the few longer than ``max_len``.

    ``augmentation`` defaults to the split's own (:class:`CorpusGenerator`). A share
    ``long_rate`` of the samples (drawn with ``seed``) get earlier exchanges of the
    same split in front, to ``long_min_tokens`` tokens of prompt (:mod:`.long_prompts`).
    """
    samples = list(CorpusGenerator(split, seed, augmentation).samples(n))  # type: ignore[arg-type]
    if long_rate > 0:
        rng = random.Random(f"long:{seed}")
        picked = [i for i in range(len(samples)) if rng.random() < long_rate]
        longer = lengthened(
            [samples[i] for i in picked],
            long_min_tokens,
            lambda text: len(tok.hf.encode(text, add_special_tokens=False).ids),
            seed=seed,
            split=split,  # type: ignore[arg-type]
        )
        for i, sample in zip(picked, longer, strict=True):
            samples[i] = sample
    prompts = tok.hf.encode_batch([s.prompt() for s in samples], add_special_tokens=False)
    targets = tok.hf.encode_batch([s.target for s in samples], add_special_tokens=False)
    out = []
    for p, t in zip(prompts, targets, strict=True):
        if len(p.ids) + 2 * len(t.ids) + 48 <= max_len:
            out.append(Example(list(p.ids), list(t.ids)))
    return out


def _augmentation_key(augmentation: augment.Augmentation) -> str:
    if augmentation == augment.NONE:
        return ""
    digest = hashlib.sha1(json.dumps(asdict(augmentation), sort_keys=True).encode())
    return f"a{digest.hexdigest()[:8]}"


def load_examples(config: TrainConfig, tok: Tokenizer) -> tuple[list[Example], list[Example]]:
    """Training and held-out examples, cached in ``out_dir`` (keyed by tokenizer and data settings)."""
    d = config.data
    augmentation = augment.from_setting(d.augment)
    key = f"v{CORPUS_VERSION}{_augmentation_key(augmentation)}-{tok.fingerprint}-{d.seed}-{d.train_samples}-{d.heldout_samples}-{d.max_len}"
    if d.long_rate > 0:
        key += f"-long{d.long_rate}x{d.long_min_tokens}"
    cache = Path(config.out_dir) / f"data-{key}.pt"
    if cache.is_file():
        raw = torch.load(cache)
        return [Example(*e) for e in raw["train"]], [Example(*e) for e in raw["heldout"]]
    t0 = time.perf_counter()
    train = build_examples(
        tok,
        "train",
        d.train_samples,
        d.seed,
        d.max_len,
        augmentation,
        long_rate=d.long_rate,
        long_min_tokens=d.long_min_tokens,
    )
    held = build_examples(tok, "heldout", d.heldout_samples, d.seed, d.max_len)
    cache.parent.mkdir(parents=True, exist_ok=True)
    _save(
        cache,
        {
            "train": [(e.prompt, e.target) for e in train],
            "heldout": [(e.prompt, e.target) for e in held],
        },
    )
    log.info("built %d training examples in %.1fs", len(train), time.perf_counter() - t0)
    return train, held


def batch_order(lengths: Sequence[int], batch_size: int, seed: int, epoch: int) -> list[list[int]]:
    """Shuffled batches of similar lengths (little padding), deterministic per (seed, epoch)."""
    rng = random.Random(f"{seed}:{epoch}")
    idx = list(range(len(lengths)))
    rng.shuffle(idx)
    chunk = batch_size * 50
    batches: list[list[int]] = []
    for i in range(0, len(idx), chunk):
        part = sorted(idx[i : i + chunk], key=lambda j: lengths[j])
        batches += [part[k : k + batch_size] for k in range(0, len(part), batch_size)]
    rng.shuffle(batches)
    return [b for b in batches if len(b) == batch_size] or batches


def lr_at(step: int, config: TrainConfig) -> float:
    """Linear warmup, then cosine decay to ``min_lr_ratio * lr`` at ``max_steps``."""
    o = config.optim
    if step < o.warmup_steps:
        return o.lr * (step + 1) / o.warmup_steps
    progress = min(1.0, (step - o.warmup_steps) / max(1, o.max_steps - o.warmup_steps))
    return o.lr * (o.min_lr_ratio + (1 - o.min_lr_ratio) * 0.5 * (1 + math.cos(math.pi * progress)))


def make_batch(
    config: TrainConfig, tok: Tokenizer, examples: Sequence[Example], seed: int
) -> Batch:
    """One batch of the config's objective; ``seed`` fixes its noise."""
    assert tok.mask_id is not None and tok.end_id is not None and tok.pad_id is not None
    gen = torch.Generator().manual_seed(seed)
    if config.objective == "autoregressive":
        return autoregressive_batch(
            examples,
            end_id=tok.end_id,
            pad_id=tok.pad_id,
            position_gap=config.optim.position_gap,
            gap_rate=config.optim.gap_rate,
            max_positions=config.model.max_seq_len,
            generator=gen,
        )
    return diffusion_batch(
        examples,
        block_length=config.optim.block_lengths or config.model.block_length,
        mask_id=tok.mask_id,
        end_id=tok.end_id,
        pad_id=tok.pad_id,
        generator=gen,
        noise_copies=config.optim.noise_copies,
        min_rate=config.optim.min_rate,
        logits_shift=config.model.logits_shift,
        position_gap=config.optim.position_gap,
        gap_rate=config.optim.gap_rate,
        max_positions=config.model.max_seq_len,
    )


def batch_loss(model: Transformer, batch: Batch) -> torch.Tensor:
    """Mean cross-entropy over the scored positions; only those are projected to the vocabulary."""
    hidden = model(
        batch.tokens,
        positions=batch.positions,
        block_ids=batch.block_ids,
        valid=batch.valid,
        attn_mask=batch.attn_mask,
        hidden_only=True,
    )
    scored = batch.labels != IGNORE
    logits = model.project(hidden[scored])
    return F.cross_entropy(logits.float(), batch.labels[scored])


@torch.no_grad()
def heldout_loss(
    model: Transformer, config: TrainConfig, tok: Tokenizer, held: Sequence[Example]
) -> float:
    """Loss on the fixed held-out examples with fixed noise (comparable across checkpoints)."""
    model.eval()
    losses = []
    bs = config.optim.batch_size
    for i in range(0, len(held), bs):
        batch = make_batch(config, tok, held[i : i + bs], seed=10_000 + i)
        losses.append(float(batch_loss(model, batch)))
    model.train()
    return sum(losses) / max(1, len(losses))


def init_weights_from(model: Transformer, source: str, tok: Tokenizer, grow: bool = False) -> None:
    """Start from another checkpoint's weights (same architecture and tokenizer); with
    ``grow``, from a shallower one of the same width, grown by block expansion
    (:mod:`.growth`)."""
    loaded = load_checkpoint(source)
    if loaded.tokenizer.fingerprint != tok.fingerprint:
        raise ValueError(f"init_from {source}: its tokenizer differs from the run's tokenizer")
    theirs = loaded.model.state_dict()
    ours, theirs_layers = model.config.n_layers, loaded.model.config.n_layers
    if grow and ours != theirs_layers:
        try:
            theirs = grown_state(theirs, theirs_layers, ours)
        except ValueError as exc:
            raise ValueError(f"init_from {source}: {exc}") from None
    if not _same_layout(theirs, model.state_dict()):
        raise ValueError(f"init_from {source}: its architecture differs from the config's model")
    model.load_state_dict(theirs)
    grown = f", grown from {theirs_layers} to {ours} layers" if ours != theirs_layers else ""
    log.info("initialized weights from %s%s", source, grown)


def mixed_with_start(
    trained: dict[str, torch.Tensor], start_file: Path, mix: float
) -> dict[str, torch.Tensor]:
    """``start + mix * (trained - start)`` per tensor, the start read from ``start_file``."""
    if not start_file.is_file():
        raise FileNotFoundError(
            f"export_mix needs the weights the run started from: {start_file} is missing "
            "(it is written when a run starts from init_from; train again with --fresh)"
        )
    start = torch.load(start_file, weights_only=False)["model"]
    if not _same_layout(start, trained):
        raise ValueError(f"{start_file}: its weights do not match the run's model")
    return {k: start[k].float() + mix * (w.float() - start[k].float()) for k, w in trained.items()}


def _same_layout(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> bool:
    """True when two state dicts have the same names with the same shapes."""
    return a.keys() == b.keys() and all(a[k].shape == b[k].shape for k in a)


def _save(path: Path, state: dict[str, Any]) -> None:
    tmp = path.with_suffix(".tmp")
    torch.save(state, tmp)
    os.replace(tmp, path)


def train(
    config: TrainConfig,
    *,
    resume: bool = True,
    max_steps: int | None = None,
    progress: bool | None = None,
    on_step: Callable[[int, float], None] | None = None,
) -> TrainResult:
    """Run (or resume) training until ``optim.max_steps`` (or ``max_steps``, to stop early)."""
    o = config.optim
    torch.set_num_threads(o.threads)
    out = Path(config.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / "config.json").write_text(json.dumps(config.to_dict(), indent=2))
    tok = load_or_train_tokenizer(config)
    if tok.vocab_size != config.model.vocab_size:
        raise ValueError(
            f"model vocab_size {config.model.vocab_size} != tokenizer vocab size {tok.vocab_size}"
        )
    config.model.mask_token_id, config.model.end_token_id = tok.mask_id, tok.end_id
    config.model.pad_token_id = tok.pad_id
    train_ex, held = load_examples(config, tok)
    lengths = [len(e.prompt) + len(e.target) for e in train_ex]

    torch.manual_seed(o.seed)
    model = Transformer(config.model)
    model.init_weights(o.seed)
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW(
        [
            {"params": decay, "weight_decay": o.weight_decay},
            {"params": no_decay, "weight_decay": 0.0},
        ],
        lr=o.lr,
        betas=o.betas,
    )
    step, best, last_loss = 0, math.inf, math.nan
    last = out / "last.pt"
    if config.init_from and not (resume and last.is_file()):
        init_weights_from(model, config.init_from, tok, grow=config.init_grow)
        # Kept for export_mix: by export time init_from may hold another model (a
        # chained run exports over the folder it started from).
        _save(out / START_WEIGHTS, {"model": model.state_dict(), "source": config.init_from})
    if resume and last.is_file():
        state = torch.load(last, weights_only=False)
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["optim"])
        step, best = state["step"], state["best_heldout_loss"]
        log.info("resumed %s at step %d", config.name, step)

    stop = min(o.max_steps, max_steps) if max_steps is not None else o.max_steps
    per_epoch = len(batch_order(lengths, o.batch_size, o.seed, 0))
    order_epoch, order = -1, []
    bar = tqdm(
        total=stop,
        initial=step,
        desc=config.name,
        disable=not (sys.stderr.isatty() if progress is None else progress),
        dynamic_ncols=True,
    )
    t_start = time.perf_counter()
    t_ckpt = t_start
    tokens_seen = 0
    model.train()

    def checkpoint() -> None:
        nonlocal best
        h = heldout_loss(model, config, tok, held)
        state = {
            "model": model.state_dict(),
            "optim": opt.state_dict(),
            "step": step,
            "best_heldout_loss": min(best, h),
            "config": config.to_dict(),
        }
        _save(last, state)
        if h < best:
            best = h
            shutil.copyfile(last, out / "best.pt")
        record = {"step": step, "loss": last_loss, "heldout_loss": h, "time": time.time()}
        with (out / "metrics.jsonl").open("a") as f:
            f.write(json.dumps(record) + "\n")
        log.info("checkpoint step %d heldout_loss %.4f (best %.4f)", step, h, best)

    while step < stop:
        epoch = step // per_epoch
        if epoch != order_epoch:
            order, order_epoch = batch_order(lengths, o.batch_size, o.seed, epoch), epoch
        idx = order[step % per_epoch]
        batch = make_batch(config, tok, [train_ex[i] for i in idx], seed=o.seed * 1_000_003 + step)
        for group in opt.param_groups:
            group["lr"] = lr_at(step, config)
        loss = batch_loss(model, batch)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), o.grad_clip)
        opt.step()
        step += 1
        last_loss = float(loss.detach())
        tokens_seen += batch.n_tokens
        bar.update(1)
        bar.set_postfix(loss=f"{last_loss:.3f}")
        if on_step is not None:
            on_step(step, last_loss)
        if step % o.log_every == 0:
            elapsed = time.perf_counter() - t_start
            log.info(
                "step %d/%d loss %.4f lr %.2e %.0f tok/s",
                step,
                stop,
                last_loss,
                lr_at(step, config),
                tokens_seen / elapsed,
            )
        if time.perf_counter() - t_ckpt > o.checkpoint_minutes * 60 or step == stop:
            checkpoint()
            t_ckpt = time.perf_counter()
    bar.close()
    return TrainResult(step, last_loss, best, time.perf_counter() - t_start, out)


def export(config: TrainConfig, checkpoint: Path | None = None, dest: Path | None = None) -> Path:
    """Ship a checkpoint (default ``last.pt``), mixed with the start under ``export_mix``:
    the ``agentflow`` folder format (fp16) plus ``training.json``."""
    out = Path(config.out_dir)
    # The last checkpoint, not best.pt: the held-out *loss* is dominated by answer phrasings
    # that training never saw, so it does not track tool-call accuracy.
    checkpoint = checkpoint or out / "last.pt"
    if not checkpoint.is_file():
        raise FileNotFoundError(f"no checkpoint to export: {checkpoint}")
    state = torch.load(checkpoint, weights_only=False)
    tok = Tokenizer.from_file(config.tokenizer.path)
    model_cfg = ModelConfig.from_dict(state["config"]["model"])
    model_cfg.mask_token_id, model_cfg.end_token_id = tok.mask_id, tok.end_id
    model_cfg.pad_token_id = tok.pad_id
    # A decoding default, not part of training: the config file's value wins.
    model_cfg.commit_order = config.model.commit_order
    model = Transformer(model_cfg)
    weights = state["model"]
    if config.export_mix < 1.0:
        start = Path(config.export_mix_from) if config.export_mix_from else out / START_WEIGHTS
        weights = mixed_with_start(weights, start, config.export_mix)
    model.load_state_dict(weights)
    dest = Path(dest or config.export_dir)
    save_checkpoint(model, tok, dest, dtype=torch.float16, canonical_pairs=True)
    meta = {
        "name": config.name,
        "objective": config.objective,
        "steps": state["step"],
        "heldout_loss": state["best_heldout_loss"],
        "export_mix": config.export_mix,
        "export_mix_from": config.export_mix_from,
        "parameters": model.num_parameters(),
        # The run's own config, but pointing at where this copy now lives: a run trained
        # into a scratch folder and shipped elsewhere records the shipped path.
        "training_config": {**state["config"], "export_dir": str(dest)},
    }
    (dest / "training.json").write_text(json.dumps(meta, indent=2) + "\n")
    return dest
