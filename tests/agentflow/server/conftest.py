"""The scripted model behind the server, and an openai client bound to the app in-process."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest
from server_fakes import ScriptedModel

from agentflow.server import create_app


@pytest.fixture
def model() -> ScriptedModel:
    return ScriptedModel()


@pytest.fixture
def app(model: ScriptedModel) -> Any:
    return create_app(model)


@pytest.fixture
def client(app: Any) -> Iterator[openai.AsyncOpenAI]:
    http = httpx.AsyncClient(transport=httpx.ASGITransport(app=app))
    yield openai.AsyncOpenAI(
        base_url="http://agentflow.test/v1", api_key="unused", http_client=http, max_retries=0
    )
