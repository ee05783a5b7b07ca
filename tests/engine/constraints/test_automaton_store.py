"""Automata kept on disk: read back equal to what was built, never at the cost of a compile."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest
import torch

from agentflow.engine.constraints import AutomatonStore, ConstraintCompiler, TokenAutomaton
from agentflow.engine.constraints.automaton_store import (
    CACHE_ENV,
    _read,
    default_cache_dir,
)
from agentflow.engine.tokenizer import Tokenizer

SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"enum": ["get_order", "cancel_order"]},
        "email": {"type": "string", "format": "email"},
        "count": {"type": "integer", "minimum": 1, "maximum": 40},
    },
    "required": ["name"],
}
FIELDS = ("final", "offsets", "tokens", "next_states", "successors", "live", "table")


def assert_same(a: TokenAutomaton, b: TokenAutomaton) -> None:
    for name in ("num_states", "vocab_size", "initial_state", "done_state", "end_token_id"):
        assert getattr(a, name) == getattr(b, name), name
    for name in FIELDS:
        x, y = getattr(a, name), getattr(b, name)
        if x is None or y is None:
            assert x is None and y is None, name
        else:
            assert x.dtype == y.dtype and torch.equal(x, y), name


def test_a_second_compiler_reads_the_automaton_the_first_built(
    tmp_path: Path, tokenizer: Tokenizer
) -> None:
    store = AutomatonStore(tmp_path)
    built = ConstraintCompiler(store=store).compile_schema(SCHEMA, tokenizer)
    assert not built.stats.stored
    assert len(list(tmp_path.iterdir())) == 1
    read = ConstraintCompiler(store=store).compile_schema(SCHEMA, tokenizer)
    assert read.stats.stored and read.regex == built.regex
    assert read.stats.num_transitions == built.stats.num_transitions
    assert_same(read.automaton, built.automaton)
    # Without the dense table (a larger automaton): the lists alone come back the same.
    (path,) = tmp_path.iterdir()
    lists = _read(path, dense_limit=0)
    assert lists.table is None
    for name in ("final", "offsets", "tokens", "next_states", "successors", "live"):
        assert torch.equal(getattr(lists, name), getattr(built.automaton, name)), name


def test_other_regexes_and_tokenizers_get_other_files(
    tmp_path: Path, tokenizer: Tokenizer, hf_tokenizer
) -> None:
    store = AutomatonStore(tmp_path)
    other = Tokenizer(hf_tokenizer)
    assert other.fingerprint != tokenizer.fingerprint
    keys = {
        store.key('"a"', tokenizer, 10),
        store.key('"b"', tokenizer, 10),
        store.key('"a"', other, 10),
        store.key('"a"', tokenizer, 11),
    }
    assert len(keys) == 4


def test_an_unreadable_file_is_dropped_and_the_automaton_rebuilt(
    tmp_path: Path, tokenizer: Tokenizer, caplog: pytest.LogCaptureFixture
) -> None:
    store = AutomatonStore(tmp_path)
    built = ConstraintCompiler(store=store).compile_schema(SCHEMA, tokenizer)
    (path,) = tmp_path.iterdir()
    path.write_bytes(b"not a safetensors file")
    with caplog.at_level(logging.WARNING):
        again = ConstraintCompiler(store=store).compile_schema(SCHEMA, tokenizer)
    assert "dropping unreadable cached automaton" in caplog.text
    assert not again.stats.stored  # rebuilt, and stored again
    assert_same(again.automaton, built.automaton)
    assert ConstraintCompiler(store=store).compile_schema(SCHEMA, tokenizer).stats.stored


def test_a_folder_that_cannot_be_written_costs_the_cache_not_the_compile(
    tmp_path: Path, tokenizer: Tokenizer, caplog: pytest.LogCaptureFixture
) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("a file where the folder should be")
    store = AutomatonStore(blocker / "automata")
    with caplog.at_level(logging.WARNING):
        compiled = ConstraintCompiler(store=store).compile_schema(SCHEMA, tokenizer)
    assert compiled.automaton.num_states > 0
    assert "cannot cache the automaton" in caplog.text


def test_the_folder_keeps_the_recently_used_files_under_its_limit(
    tmp_path: Path, tokenizer: Tokenizer
) -> None:
    store = AutomatonStore(tmp_path)
    regexes = ['"a[0-9]{1,3}"', '"b[0-9]{1,3}"', '"c[0-9]{1,3}"']
    compiler = ConstraintCompiler(store=store)
    for regex in regexes[:2]:
        compiler.compile_regex(regex, tokenizer)
    first, second = (store.path(store.key(r, tokenizer, 4_000_000)) for r in regexes[:2])
    os.utime(first, (1, 1))
    os.utime(second, (2, 2))
    assert store.load(first.stem, 4_000_000) is not None  # used now: the newest
    store.max_bytes = first.stat().st_size + second.stat().st_size
    compiler.compile_regex(regexes[2], tokenizer)
    assert first.exists() and not second.exists()
    store.clear()
    assert list(tmp_path.iterdir()) == []


def test_the_cache_folder_follows_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(CACHE_ENV, str(tmp_path))
    assert default_cache_dir() == tmp_path / "automata"
    store = AutomatonStore.default()
    assert store is not None and store.directory == tmp_path / "automata"
    monkeypatch.setenv(CACHE_ENV, "off")
    assert default_cache_dir() is None and AutomatonStore.default() is None
    monkeypatch.delenv(CACHE_ENV)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert default_cache_dir() == tmp_path / "xdg" / "agentflow" / "automata"
    with pytest.raises(ValueError, match="max_bytes"):
        AutomatonStore(tmp_path, max_bytes=-1)
