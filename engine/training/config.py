"""The training configuration file (one JSON per model, see ``configs/``)."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, Literal

from ..model import ModelConfig
from . import augment
from .objectives import check_position_gap

Objective = Literal["diffusion", "autoregressive"]


@dataclass
class TokenizerSettings:
    """Where the shared tokenizer lives and how it is trained when missing."""

    path: str = "train_out/tokenizer.json"
    samples: int = 20000
    vocab_size: int = 2048
    seed: int = 0


@dataclass
class DataSettings:
    """How many corpus samples to draw, and the longest sequence kept."""

    train_samples: int = 80000
    heldout_samples: int = 64
    seed: int = 0
    max_len: int = 384
    # Perturb the training split: true (augment.TRAINING: names hidden, made-up tools),
    # false, or an object overriding some of TRAINING's probabilities. The configs of
    # stages trained before a perturbation existed switch it off, so they reproduce.
    augment: bool | dict[str, float] = True
    # A share ``long_rate`` of the training samples get earlier finished exchanges put in
    # front until their prompt has ``long_min_tokens`` tokens (:mod:`.long_prompts`): long
    # conversations seen in training, not only through position gaps. 0: none.
    long_rate: float = 0.0
    long_min_tokens: int = 0

    def __post_init__(self) -> None:
        augment.from_setting(self.augment)  # a bad setting fails when the config loads
        if not 0.0 <= self.long_rate <= 1.0:
            raise ValueError(f"data.long_rate must be in [0, 1], got {self.long_rate}")
        if self.long_rate > 0 and not 0 < self.long_min_tokens < self.max_len:
            raise ValueError(
                f"data.long_min_tokens must be in (0, max_len={self.max_len}) when long_rate "
                f"is set, got {self.long_min_tokens}"
            )


@dataclass
class OptimSettings:
    """Optimizer, schedule, noising and bookkeeping."""

    batch_size: int = 8
    lr: float = 1.5e-3
    min_lr_ratio: float = 0.1
    warmup_steps: int = 100
    max_steps: int = 2000
    weight_decay: float = 0.1
    betas: tuple[float, float] = (0.9, 0.95)
    grad_clip: float = 1.0
    noise_copies: int = 2
    min_rate: float = 0.1
    # Diffusion block lengths drawn per example (empty: the model's block_length).
    block_lengths: tuple[int, ...] = ()
    # A share ``gap_rate`` of the rows skip up to ``position_gap`` positions
    # inside the prompt (objectives.py, "Position gaps"); 0 leaves every batch as it was.
    position_gap: int = 0
    gap_rate: float = 0.0
    threads: int = 1
    checkpoint_minutes: float = 5.0
    log_every: int = 25
    seed: int = 0


@dataclass
class TrainConfig:
    """Everything one ``agentflow train`` run needs."""

    name: str
    objective: Objective
    model: ModelConfig
    out_dir: str
    export_dir: str
    tokenizer: TokenizerSettings = field(default_factory=TokenizerSettings)
    data: DataSettings = field(default_factory=DataSettings)
    optim: OptimSettings = field(default_factory=OptimSettings)
    # A checkpoint folder (or packaged model name) whose weights start a fresh run, so a
    # run can continue from a shipped model; ignored when the run resumes from last.pt.
    init_from: str | None = None
    # With init_from: when the config's model is deeper than init_from's (same width),
    # grow it by block expansion (growth.py): zeroed copies of evenly spaced layers.
    init_grow: bool = False
    # What export ships: start + export_mix * (trained - start), where start is the
    # init_from weights (kept as init.pt in out_dir). 1: the trained weights; 0.5: the
    # midpoint, a weight-space ensemble of the run and the model it continued
    # (docs/models.md, "Weight averaging").
    export_mix: float = 1.0
    # The start of that mix when it is not this run's own: an earlier run's init.pt, so
    # that a chain of runs (A from the shipped model, B from A) ships the point between
    # the shipped model and B.
    export_mix_from: str | None = None

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> TrainConfig:
        def build(kind: type, value: dict[str, Any] | None, section: str) -> Any:
            value = dict(value or {})
            names = {f.name for f in fields(kind)}
            unknown = sorted(set(value) - names)
            if unknown:
                raise ValueError(f"unknown keys in training config section {section!r}: {unknown}")
            for key in ("betas", "block_lengths"):
                if key in value:
                    value[key] = tuple(value[key])
            return kind(**value)

        unknown = sorted(
            set(raw)
            - {"name", "objective", "model", "out_dir", "export_dir"}
            - {"tokenizer", "data", "optim", "init_from", "init_grow"}
            - {"export_mix", "export_mix_from"}
        )
        if unknown:
            raise ValueError(f"unknown top-level keys in training config: {unknown}")
        missing = [
            k for k in ("name", "objective", "model", "out_dir", "export_dir") if k not in raw
        ]
        if missing:
            raise ValueError(f"training config is missing {missing}")
        if raw["objective"] not in ("diffusion", "autoregressive"):
            raise ValueError(
                f"objective must be 'diffusion' or 'autoregressive', got {raw['objective']!r}"
            )
        model = ModelConfig.from_dict(raw["model"])
        optim = build(OptimSettings, raw.get("optim"), "optim")
        try:
            check_position_gap(optim.position_gap, optim.gap_rate)
        except ValueError as exc:  # fails when the config loads, not at the first batch
            raise ValueError(f"optim.{exc}") from None
        export_mix = float(raw.get("export_mix", 1.0))
        if not 0.0 < export_mix <= 1.0:
            raise ValueError(f"export_mix must be in (0, 1], got {export_mix}")
        if export_mix < 1.0 and not (raw.get("init_from") or raw.get("export_mix_from")):
            raise ValueError(
                "export_mix < 1 mixes the trained weights with the ones the run started "
                "from, so it needs init_from (or export_mix_from)"
            )
        init_grow = raw.get("init_grow", False)
        if not isinstance(init_grow, bool):
            raise ValueError(f"init_grow must be true or false, got {init_grow!r}")
        if init_grow and not raw.get("init_from"):
            raise ValueError("init_grow grows the init_from model, so it needs init_from")
        return cls(
            name=raw["name"],
            objective=raw["objective"],
            model=model,
            out_dir=raw["out_dir"],
            export_dir=raw["export_dir"],
            tokenizer=build(TokenizerSettings, raw.get("tokenizer"), "tokenizer"),
            data=build(DataSettings, raw.get("data"), "data"),
            optim=optim,
            init_from=raw.get("init_from"),
            init_grow=init_grow,
            export_mix=export_mix,
            export_mix_from=raw.get("export_mix_from"),
        )

    @classmethod
    def load(cls, path: str | Path) -> TrainConfig:
        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(f"training config not found: {path}")
        return cls.from_dict(json.loads(path.read_text()))

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["model"] = self.model.to_dict()
        return out
