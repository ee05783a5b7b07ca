"""HTTP tools against httpx.MockTransport and a local server on 127.0.0.1."""

from __future__ import annotations

import json
from typing import Any

import anyio
import httpx
import pytest

from agentflow.tool import Tool
from agentflow.tools import ToolConfigError, URLNotAllowedError, http_tools
from agentflow.tools.http import HttpTools


class Recorder:
    def __init__(self) -> None:
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        if request.url.path == "/api/orders/58213":
            return httpx.Response(200, json={"order_id": "58213", "status": "shipped"})
        if request.url.path == "/api/big":
            return httpx.Response(200, text="x" * 5000, headers={"content-type": "text/plain"})
        if request.url.path == "/api/moved":
            return httpx.Response(302, headers={"location": "http://evil.test/"})
        if request.method == "POST":
            return httpx.Response(201, json={"received": json.loads(request.content)})
        return httpx.Response(404, json={"error": "not found"})


@pytest.fixture
def recorder() -> Recorder:
    return Recorder()


@pytest.fixture
def tools(recorder: Recorder) -> dict[str, Tool]:
    made = http_tools(
        "http://shop.test/api",
        name="shop",
        max_bytes=1000,
        headers={"Authorization": "Bearer k"},
        transport=httpx.MockTransport(recorder),
    )
    return {t.name: t for t in made}


def call(tool: Tool, **arguments: Any) -> Any:
    return anyio.run(tool.invoke, arguments)


def test_get_and_post_under_the_base_url(tools: dict[str, Tool], recorder: Recorder) -> None:
    got = call(tools["shop_get"], path="/orders/58213", params={"expand": "items"})
    assert got["status"] == 200 and got["body"] == {"order_id": "58213", "status": "shipped"}
    assert recorder.requests[0].url == "http://shop.test/api/orders/58213?expand=items"
    assert recorder.requests[0].headers["authorization"] == "Bearer k"
    posted = call(tools["shop_post"], path="tickets", body={"subject": "late"})
    assert posted["status"] == 201 and posted["body"] == {"received": {"subject": "late"}}
    missing = call(tools["shop_get"], path="nothing")
    assert missing["status"] == 404  # an observation, not an exception


@pytest.mark.parametrize(
    "path",
    [
        "../admin",
        "/orders/../../admin",
        "%2e%2e/admin",
        "http://evil.test/x",
        "//evil.test/x",
        "a?x=1",
        "a\\b",
    ],
)
def test_urls_outside_the_base_are_refused(
    tools: dict[str, Tool], recorder: Recorder, path: str
) -> None:
    with pytest.raises(URLNotAllowedError):
        call(tools["shop_get"], path=path)
    assert recorder.requests == []


def test_response_size_is_capped(tools: dict[str, Tool]) -> None:
    result = call(tools["shop_get"], path="big")
    assert result["truncated"] is True and len(result["body"]) == 1000


def test_redirects_are_reported_not_followed(tools: dict[str, Tool], recorder: Recorder) -> None:
    result = call(tools["shop_get"], path="moved")
    assert result["status"] == 302 and result["location"] == "http://evil.test/"
    assert len(recorder.requests) == 1


def test_timeout_against_a_slow_local_server() -> None:
    import threading
    import time

    import uvicorn
    from starlette.applications import Starlette
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    async def slow(_: Any) -> JSONResponse:
        await anyio.sleep(2.0)
        return JSONResponse({})

    async def fast(_: Any) -> JSONResponse:
        return JSONResponse({"ok": True})

    app = Starlette(routes=[Route("/slow", slow), Route("/fast", fast)])
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=0, log_level="error", lifespan="off")
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        while not server.started:
            time.sleep(0.01)
        port = server.servers[0].sockets[0].getsockname()[1]
        get = HttpTools(f"http://127.0.0.1:{port}", timeout=0.2).tools()[0]
        assert call(get, path="fast")["body"] == {"ok": True}
        started = time.perf_counter()
        with pytest.raises(httpx.TimeoutException):
            call(get, path="slow")
        assert time.perf_counter() - started < 1.5
    finally:
        server.should_exit = True
        thread.join(timeout=5)


def test_configuration_is_checked() -> None:
    with pytest.raises(ToolConfigError, match="absolute http"):
        http_tools("ftp://x/")
    with pytest.raises(ToolConfigError, match="methods"):
        http_tools("http://x/", methods=["DELETE"])
    assert [t.name for t in http_tools("http://x/", methods=["GET"])] == ["http_get"]
