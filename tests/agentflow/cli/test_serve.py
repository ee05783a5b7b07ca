"""``agentflow serve``: argument checks, and the app it would serve (uvicorn.run intercepted)."""

from __future__ import annotations

from typing import Any

import anyio
import httpx
import pytest

from agentflow.cli import main


def test_serves_the_requested_models(monkeypatch: pytest.MonkeyPatch) -> None:
    captured: dict[str, Any] = {}

    def fake_run(app: Any, **kwargs: Any) -> None:
        captured["app"], captured["kwargs"] = app, kwargs

    monkeypatch.setattr("uvicorn.run", fake_run)
    assert main(["serve", "--model", "test", "--port", "8123", "--max-concurrency", "2"]) == 0
    assert captured["kwargs"]["host"] == "127.0.0.1" and captured["kwargs"]["port"] == 8123

    async def models() -> Any:
        async with httpx.AsyncClient(
            transport=httpx.ASGITransport(app=captured["app"]), base_url="http://t"
        ) as c:
            return (await c.get("/v1/models")).json()

    assert [m["id"] for m in anyio.run(models)["data"]] == ["test"]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--port", "70000"], "--port must be in 0..65535"),
        (["--max-concurrency", "0"], "--max-concurrency must be at least 1"),
        (["--model", "openai:gpt"], "remote already"),
        (["--model", "test", "--model", "test"], "same name 'test'"),
    ],
)
def test_bad_arguments_exit_2(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    argv: list[str],
    message: str,
) -> None:
    monkeypatch.setattr("uvicorn.run", lambda *a, **k: pytest.fail("must not serve"))
    assert main(["serve", *argv]) == 2
    assert message in capsys.readouterr().err
