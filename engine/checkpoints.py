"""Load and save checkpoint folders; resolve model names to folders.

A checkpoint is a local folder with ``config.json``, one or more
``*.safetensors`` files, ``tokenizer.json`` and optionally
``tokenizer_config.json`` (whose ``chat_template`` the HF formats use). The
format is detected from ``config.json`` (see :mod:`.checkpoint_formats`).
Nothing is ever downloaded: a name resolves to a model packaged in
``agentflow/engine/weights/``, anything else is a path.

Weights are stored in bf16 (or fp16) and loaded in fp32 on the CPU by default
(the CPU has no fast bf16 matmul); on CUDA they stay in the stored dtype.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file
from tokenizers import Tokenizer as HFTokenizer

from .canonical_pairs import PAIRS_FILE, write_pairs_file
from .checkpoint_formats import (
    IGNORED_SUFFIXES,
    SUPPORTED_FORMATS,
    CheckpointFormat,
    detect_format,
)
from .errors import CheckpointError
from .model import ModelConfig, Transformer
from .tokenizer import Tokenizer, saved_pairs

#: Models shipped inside the package (trained by ``agentflow train``).
PACKAGED_MODELS: tuple[str, ...] = ("agentflow-tiny-dlm", "agentflow-tiny-ar")
#: The model used when none is named.
DEFAULT_MODEL = "agentflow-tiny-dlm"
FORMAT_VERSION = 1


@dataclass
class LoadedModel:
    """A model ready to decode, with its tokenizer and where it came from."""

    model: Transformer
    tokenizer: Tokenizer
    format: str
    path: Path
    #: ``tokenizer_config.json`` contents (empty when the file is absent).
    tokenizer_config: dict[str, Any] = field(default_factory=dict)

    @property
    def config(self) -> ModelConfig:
        return self.model.config

    @property
    def chat_template(self) -> str | None:
        """The HF jinja chat template of the checkpoint, if it ships one."""
        tpl = self.tokenizer_config.get("chat_template")
        if isinstance(tpl, list):  # named templates: [{"name": ..., "template": ...}]
            named = {t.get("name"): t.get("template") for t in tpl if isinstance(t, dict)}
            tpl = named.get("default") or next(iter(named.values()), None)
        return tpl if isinstance(tpl, str) else None


def weights_dir() -> Path:
    """Where packaged models live: ``agentflow/engine/weights/``."""
    return Path(__file__).resolve().parent / "weights"


def resolve_model_path(name_or_path: str | Path | None = None) -> Path:
    """A packaged model name or a local folder path → the checkpoint folder."""
    name = str(name_or_path) if name_or_path is not None else DEFAULT_MODEL
    if name in PACKAGED_MODELS:
        folder = weights_dir() / name
        if not (folder / "config.json").is_file():
            raise CheckpointError(
                f"the packaged model {name!r} is not installed at {folder}; train it with"
                f" `agentflow train --config engine/training/configs/{name.removeprefix('agentflow-')}.json`"
                " (or `make train`)",
                path=folder,
            )
        return folder
    folder = Path(name).expanduser()
    if not folder.is_dir():
        raise CheckpointError(
            f"model {name!r} is neither a packaged model ({', '.join(PACKAGED_MODELS)})"
            " nor an existing folder",
            path=folder,
        )
    return folder


def _read_json(path: Path) -> dict[str, Any]:
    if not path.is_file():
        raise CheckpointError(f"checkpoint file not found: {path}", path=path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise CheckpointError(f"cannot read {path}: {exc}", path=path) from exc
    if not isinstance(data, dict):
        raise CheckpointError(f"{path} must hold a JSON object", path=path)
    return data


def _read_tensors(folder: Path) -> tuple[dict[str, torch.Tensor], dict[str, Path]]:
    files = sorted(folder.glob("*.safetensors"))
    if not files:
        raise CheckpointError(
            f"no *.safetensors file in {folder}", path=folder / "model.safetensors"
        )
    tensors: dict[str, torch.Tensor] = {}
    origin: dict[str, Path] = {}
    for f in files:
        try:
            part = load_file(str(f), device="cpu")
        except (SafetensorError, OSError, ValueError) as exc:
            raise CheckpointError(f"corrupt safetensors file {f}: {exc}", path=f) from exc
        tensors.update(part)
        origin.update(dict.fromkeys(part, f))
    return tensors, origin


def _load_tokenizer(folder: Path, config: ModelConfig, fmt: CheckpointFormat) -> Tokenizer:
    path = folder / "tokenizer.json"
    if fmt.name == "agentflow":
        return Tokenizer.from_file(path)
    if not path.is_file():
        raise CheckpointError(f"tokenizer file not found: {path}", path=path)
    try:
        hf = HFTokenizer.from_file(str(path))
    except Exception as exc:  # tokenizers raises a bare Exception on bad JSON
        raise CheckpointError(f"cannot read tokenizer {path}: {exc}", path=path) from exc

    def name(token_id: int | None) -> str | None:
        return hf.id_to_token(token_id) if token_id is not None else None

    return Tokenizer(
        hf,
        mask_token=name(config.mask_token_id),
        end_token=name(config.end_token_id),
        pad_token=name(config.pad_token_id),
        source=str(path),
        pairs_file=saved_pairs(folder),
    )


def load_checkpoint(
    name_or_path: str | Path | None = None,
    *,
    device: torch.device | str = "cpu",
    dtype: torch.dtype | None = None,
) -> LoadedModel:
    """Load a checkpoint folder (or packaged model name) of any supported format."""
    folder = resolve_model_path(name_or_path)
    raw = _read_json(folder / "config.json")
    fmt = detect_format(raw, source=str(folder / "config.json"))
    try:
        config = fmt.parse_config(raw, fmt)
    except (ValueError, TypeError) as exc:  # a setting ModelConfig refuses
        source = folder / "config.json"
        raise CheckpointError(f"{source}: {exc}", path=source) from exc
    names = fmt.tensor_names(config)
    tensors, origin = _read_tensors(folder)

    device = torch.device(device)
    if dtype is None:
        dtype = torch.float32 if device.type == "cpu" else next(iter(tensors.values())).dtype
    state: dict[str, torch.Tensor] = {}
    missing = [theirs for theirs in names.values() if theirs not in tensors]
    if missing:
        shown = ", ".join(missing[:5]) + (
            f" (+{len(missing) - 5} more)" if len(missing) > 5 else ""
        )
        raise CheckpointError(
            f"{fmt.name} checkpoint {folder} lacks tensors: {shown}",
            path=folder / "model.safetensors",
        )
    known = set(names.values())
    if config.tie_embeddings:  # some exporters write the tied head anyway
        known |= {"lm_head.weight", "model.transformer.ff_out.weight"}
    extra = [k for k in tensors if k not in known and not k.endswith(IGNORED_SUFFIXES)]
    if extra:
        raise CheckpointError(
            f"{origin[extra[0]]} holds tensors the {fmt.name} format does not define: "
            + ", ".join(extra[:5]),
            path=origin[extra[0]],
        )
    with torch.device("meta"):
        model = Transformer(config)
    expected = model.state_dict()
    for ours, theirs in names.items():
        t = tensors[theirs]
        if tuple(t.shape) != tuple(expected[ours].shape):
            raise CheckpointError(
                f"{origin[theirs]}: tensor {theirs} has shape {tuple(t.shape)},"
                f" config.json implies {tuple(expected[ours].shape)}",
                path=origin[theirs],
            )
        state[ours] = t.to(device=device, dtype=dtype)
    model.load_state_dict(state, strict=True, assign=True)
    tokenizer = _load_tokenizer(folder, config, fmt)
    tok_cfg_path = folder / "tokenizer_config.json"
    tok_cfg = _read_json(tok_cfg_path) if tok_cfg_path.exists() else {}
    if fmt.name != "agentflow":
        config.extra_end_token_ids = _more_end_ids(folder, config, tokenizer, tok_cfg)
    return LoadedModel(model.eval(), tokenizer, fmt.name, folder, tok_cfg)


def _more_end_ids(
    folder: Path, config: ModelConfig, tokenizer: Tokenizer, tok_cfg: dict[str, Any]
) -> tuple[int, ...]:
    """End tokens besides ``config.end_token_id``: the rest of config.json's
    ``eos_token_id`` list, ``generation_config.json``'s, and the tokenizer's
    ``eos_token`` (a chat model's end of turn, e.g. ``<|eot_id|>``)."""
    found = list(config.extra_end_token_ids)
    gen_path = folder / "generation_config.json"
    if gen_path.exists():
        value = _read_json(gen_path).get("eos_token_id")
        found += [value] if isinstance(value, int) else list(value or [])
    eos = tok_cfg.get("eos_token")
    if isinstance(eos, dict):
        eos = eos.get("content")
    eos_id = tokenizer.hf.token_to_id(eos) if isinstance(eos, str) else None
    if eos_id is not None:
        found.append(eos_id)
    out: list[int] = []
    for t in found:
        if not isinstance(t, int) or not 0 <= t < config.vocab_size:
            raise CheckpointError(f"{folder}: end token id {t!r} is not in the vocabulary")
        if t != config.end_token_id and t not in out:
            out.append(t)
    return tuple(out)


def save_checkpoint(
    model: Transformer,
    tokenizer: Tokenizer | HFTokenizer,
    folder: str | Path,
    *,
    dtype: torch.dtype = torch.bfloat16,
    tokenizer_config: dict[str, Any] | None = None,
    canonical_pairs: bool = False,
) -> Path:
    """Write ``model`` in the ``agentflow`` format (weights in ``dtype``, bf16 by default).

    ``canonical_pairs`` also writes the tokenizer's whole canonical-pair table
    (:data:`~.canonical_pairs.PAIRS_FILE`), so that constrained decoding does not
    build its rows at run time: worth it for small vocabularies (about 20 s to
    build for 2,048 tokens)."""
    if dtype not in (torch.bfloat16, torch.float16, torch.float32):
        raise ValueError(f"weights are stored as bf16, fp16 or fp32, not {dtype}")
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    config = {"format": "agentflow", "format_version": FORMAT_VERSION, **model.config.to_dict()}
    (folder / "config.json").write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
    state = {k: v.detach().to("cpu", dtype).contiguous() for k, v in model.state_dict().items()}
    save_file(state, str(folder / "model.safetensors"), metadata={"format": "agentflow"})
    hf = tokenizer.hf if isinstance(tokenizer, Tokenizer) else tokenizer
    hf.save(str(folder / "tokenizer.json"))
    stale = folder / PAIRS_FILE
    if canonical_pairs:
        write_pairs_file(tokenizer if isinstance(tokenizer, Tokenizer) else Tokenizer(hf), folder)
    elif stale.is_file():
        stale.unlink()  # rows of the tokenizer the folder held before
    if tokenizer_config is not None:
        text = json.dumps(tokenizer_config, indent=2, ensure_ascii=False) + "\n"
        (folder / "tokenizer_config.json").write_text(text, encoding="utf-8")
    return folder


__all__ = [
    "DEFAULT_MODEL",
    "PACKAGED_MODELS",
    "SUPPORTED_FORMATS",
    "LoadedModel",
    "load_checkpoint",
    "resolve_model_path",
    "save_checkpoint",
    "weights_dir",
]
