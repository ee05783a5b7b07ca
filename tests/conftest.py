"""Fixtures for every test folder."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from agentflow.engine.constraints.automaton_store import CACHE_ENV
from agentflow.engine.tool_similarity import WordVectors


@pytest.fixture(scope="session")
def _session_cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("agentflow-cache")


@pytest.fixture(autouse=True)
def _cache_in_a_temporary_folder(
    _session_cache_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[None]:
    """Compiled automata go to a folder of this test session, never the user's cache."""
    monkeypatch.setenv(CACHE_ENV, str(_session_cache_dir))
    yield


@pytest.fixture(scope="session")
def vectors() -> WordVectors:
    """The packaged word vectors of tool similarity (read once per test session)."""
    return WordVectors.load()
