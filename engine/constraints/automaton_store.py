"""Token automata on disk: a schema is indexed once per machine, not once per process.

Indexing a regex over the vocabulary is the slow part of compiling a schema
(0.8–0.9 s for an action schema whose tool takes an email: the format's
bounded parts make ~2,000 states and 2.4 M transitions). ``ConstraintCompiler``
keeps automata in memory for one process; an :class:`AutomatonStore` keeps them
in a folder, so the next process — a CLI call, a restarted server, an eval —
reads them back in milliseconds (outlines and Hugging Face cache the same way).

One safetensors file per automaton, named by a hash of everything the automaton
depends on: the regex, the tokenizer's fingerprint, the dense-table limit, this
format's version and outlines-core's. The CSR lists are stored (in 16 bits where
they fit); the successor relation and the dense table are rebuilt on load. A
file that cannot be read is dropped with a warning and the automaton rebuilt; a
folder that cannot be written costs the cache, never the compile. The folder is
kept under ``max_bytes`` by dropping the least recently used files.

``$AGENTFLOW_CACHE_DIR`` moves the folder (automata go in its ``automata/``);
``AGENTFLOW_CACHE_DIR=off`` turns the cache off.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import tempfile
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import TYPE_CHECKING

import torch
from safetensors import SafetensorError, safe_open
from safetensors.torch import load_file, save_file

from .automaton import TokenAutomaton, derived_tables

if TYPE_CHECKING:
    from .index import TokenSource

logger = logging.getLogger(__name__)

#: Bump when the stored layout or what ``build_token_automaton`` produces changes.
FORMAT = 1
#: The environment variable that moves (or, set to ``off``, disables) the cache.
CACHE_ENV = "AGENTFLOW_CACHE_DIR"
#: Default size limit of the automata folder.
DEFAULT_MAX_BYTES = 512 * 2**20
_SUFFIX = ".safetensors"
_OFF = ("", "0", "off", "false", "none")


def default_cache_dir() -> Path | None:
    """The automata folder: ``$AGENTFLOW_CACHE_DIR/automata``, else
    ``$XDG_CACHE_HOME/agentflow/automata``, else ``~/.cache/agentflow/automata``;
    None when ``$AGENTFLOW_CACHE_DIR`` is ``off``."""
    configured = os.environ.get(CACHE_ENV)
    if configured is not None:
        if configured.strip().lower() in _OFF:
            return None
        return Path(configured).expanduser() / "automata"
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base).expanduser() / "agentflow" / "automata"


def _outlines_version() -> str:
    try:
        return version("outlines-core")
    except PackageNotFoundError:  # pragma: no cover - it is a dependency
        return "unknown"


@dataclass
class AutomatonStore:
    """A folder of token automata (module docstring)."""

    directory: Path
    max_bytes: int = DEFAULT_MAX_BYTES

    def __post_init__(self) -> None:
        self.directory = Path(self.directory)
        if self.max_bytes < 0:
            raise ValueError(f"max_bytes must be >= 0, got {self.max_bytes}")

    @classmethod
    def default(cls) -> AutomatonStore | None:
        """The store at :func:`default_cache_dir` (None when the cache is off)."""
        folder = default_cache_dir()
        return None if folder is None else cls(folder)

    def key(self, regex: str, tokenizer: TokenSource, dense_limit: int) -> str:
        """The file name stem of ``regex``'s automaton over ``tokenizer``."""
        parts = [FORMAT, _outlines_version(), tokenizer.fingerprint, dense_limit, regex]
        return hashlib.sha256(json.dumps(parts).encode()).hexdigest()[:32]

    def path(self, key: str) -> Path:
        return self.directory / f"{key}{_SUFFIX}"

    def load(self, key: str, dense_limit: int) -> TokenAutomaton | None:
        """The stored automaton, or None (not stored, or unreadable: then dropped)."""
        path = self.path(key)
        if not path.is_file():
            return None
        try:
            automaton = _read(path, dense_limit)
        except (OSError, SafetensorError, KeyError, ValueError, RuntimeError) as exc:
            logger.warning("dropping unreadable cached automaton %s: %s", path, exc)
            path.unlink(missing_ok=True)
            return None
        with contextlib.suppress(OSError):
            os.utime(path)  # recently used: kept longest
        return automaton

    def save(self, key: str, automaton: TokenAutomaton) -> None:
        """Store ``automaton`` (atomically; a failure is logged, never raised)."""
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=self.directory, suffix=".tmp")
            os.close(fd)
            try:
                _write(Path(tmp), automaton)
                os.replace(tmp, self.path(key))
            finally:
                Path(tmp).unlink(missing_ok=True)
            self._trim()
        except (OSError, SafetensorError, ValueError) as exc:
            logger.warning("cannot cache the automaton in %s: %s", self.directory, exc)

    def clear(self) -> None:
        """Delete every stored automaton."""
        for path in self._files():
            path.unlink(missing_ok=True)

    def _files(self) -> list[Path]:
        if not self.directory.is_dir():
            return []
        return [p for p in self.directory.iterdir() if p.name.endswith(_SUFFIX)]

    def _trim(self) -> None:
        """Drop the least recently used files until the folder fits ``max_bytes``."""
        files = []
        for path in self._files():
            try:
                st = path.stat()
            except OSError:
                continue
            files.append((st.st_mtime, st.st_size, path))
        total = sum(size for _, size, _ in files)
        for _, size, path in sorted(files):
            if total <= self.max_bytes:
                break
            path.unlink(missing_ok=True)
            total -= size


def _narrow(values: torch.Tensor, bound: int) -> torch.Tensor:
    """int16 when every value of ``values`` (in [-1, bound)) fits, else int32."""
    return values.to(torch.int16 if bound <= 2**15 else torch.int32)


def _write(path: Path, a: TokenAutomaton) -> None:
    tensors = {
        "final": a.final.to(torch.uint8).contiguous(),
        "live": a.live.to(torch.uint8).contiguous(),
        "offsets": a.offsets.to(torch.int64).contiguous(),
        "tokens": _narrow(a.tokens, a.vocab_size).contiguous(),
        "next_states": _narrow(a.next_states, a.num_states).contiguous(),
    }
    meta = {
        "format": str(FORMAT),
        "num_states": str(a.num_states),
        "vocab_size": str(a.vocab_size),
        "initial_state": str(a.initial_state),
        "done_state": str(a.done_state),
        "end_token_id": str(a.end_token_id),
    }
    save_file(tensors, str(path), metadata=meta)


def _read(path: Path, dense_limit: int) -> TokenAutomaton:
    with safe_open(str(path), framework="pt") as f:
        meta = f.metadata() or {}
    if meta.get("format") != str(FORMAT):
        raise ValueError(f"format {meta.get('format')!r}, expected {FORMAT}")
    t = load_file(str(path))
    num_states, vocab_size = int(meta["num_states"]), int(meta["vocab_size"])
    offsets = t["offsets"]
    tokens = t["tokens"].to(torch.int32)
    next_states = t["next_states"].to(torch.int32)
    if offsets.numel() != num_states + 1 or int(offsets[-1]) != tokens.numel():
        raise ValueError("transition lists do not match the state count")
    src = torch.repeat_interleave(torch.arange(num_states), offsets.diff())
    successors, table = derived_tables(
        src, tokens, next_states, num_states, vocab_size, dense_limit
    )
    return TokenAutomaton(
        num_states=num_states,
        vocab_size=vocab_size,
        initial_state=int(meta["initial_state"]),
        done_state=int(meta["done_state"]),
        end_token_id=int(meta["end_token_id"]),
        final=t["final"].to(torch.bool),
        offsets=offsets,
        tokens=tokens,
        next_states=next_states,
        successors=successors,
        live=t["live"].to(torch.bool),
        table=table,
    )
