"""HTTP tools: GET and POST against one allow-listed base URL, over httpx.

The model gives a path relative to the base URL (``/orders/58213``); anything that
would leave it — another host or scheme, ``..`` segments (also percent-encoded),
a protocol-relative ``//host`` — raises
:class:`~agentflow.tools.errors.URLNotAllowedError`. Redirects are not followed
(a 3xx is reported with its ``Location``). Each call has a timeout, and the body
read is capped at ``max_bytes`` (the rest is dropped and ``truncated`` is set).
A non-2xx status is a result the model can read, not an exception.
"""

from __future__ import annotations

import json
import posixpath
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import unquote

import httpx

from agentflow.tool import Tool, tool

from .errors import ToolConfigError, URLNotAllowedError

_METHODS = ("GET", "POST")


class HttpTools:
    """GET/POST tools bound to ``base_url``; ``tools()`` gives the :class:`Tool` objects."""

    def __init__(
        self,
        base_url: str,
        *,
        name: str = "http",
        methods: Sequence[str] = _METHODS,
        timeout: float = 10.0,
        max_bytes: int = 200_000,
        headers: Mapping[str, str] | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        base = httpx.URL(base_url)
        if base.scheme not in ("http", "https") or not base.host:
            raise ToolConfigError(f"base_url must be an absolute http(s) URL, got {base_url!r}")
        if base.query or base.fragment:
            raise ToolConfigError(f"base_url must not carry a query or fragment: {base_url!r}")
        unknown = {m.upper() for m in methods} - set(_METHODS)
        if unknown or not methods:
            raise ToolConfigError(
                f"methods must be a non-empty subset of {_METHODS}, got {list(methods)}"
            )
        if timeout <= 0 or max_bytes <= 0:
            raise ToolConfigError("timeout and max_bytes must be positive")
        self.base = base.copy_with(path=base.path.rstrip("/") + "/")
        self.name = name
        self.methods = tuple(m.upper() for m in methods)
        self.timeout = timeout
        self.max_bytes = max_bytes
        self.headers = dict(headers or {})
        self._transport = transport

    def resolve(self, path: str) -> httpx.URL:
        """The absolute URL for ``path``; refuses anything outside the base URL."""
        if (
            any(c in path for c in ("\x00", "\\", "#", "?"))
            or "://" in path
            or path.startswith("//")
        ):
            raise URLNotAllowedError(
                f"path {path!r} is not allowed: give a plain path under {self.base} "
                "(query parameters go in 'params')"
            )
        for text in (path, unquote(path)):
            if ".." in text.split("/"):
                raise URLNotAllowedError(f"path {path!r} is not allowed: '..' segments")
        joined = posixpath.normpath(self.base.path + path.lstrip("/"))
        if path.endswith("/") and not joined.endswith("/"):
            joined += "/"
        if not (joined + "/").startswith(self.base.path):
            raise URLNotAllowedError(f"path {path!r} leaves {self.base}")
        return self.base.copy_with(path=joined)

    async def _request(
        self, method: str, path: str, *, params: Mapping[str, str] | None, body: Any
    ) -> dict[str, Any]:
        url = self.resolve(path)
        async with (
            httpx.AsyncClient(
                transport=self._transport,
                timeout=httpx.Timeout(self.timeout),
                follow_redirects=False,
                headers=self.headers,
            ) as client,
            client.stream(method, url, params=params, json=body) as response,
        ):
            data = bytearray()
            truncated = False
            async for piece in response.aiter_bytes():
                room = self.max_bytes - len(data)
                if len(piece) > room:
                    data += piece[:room]
                    truncated = True
                    break
                data += piece
        return self._result(response, bytes(data), truncated)

    def _result(self, response: httpx.Response, data: bytes, truncated: bool) -> dict[str, Any]:
        content_type = response.headers.get("content-type", "")
        text = data.decode(response.encoding or "utf-8", errors="replace")
        body: Any = text
        if "json" in content_type and not truncated:
            try:
                body = json.loads(text)
            except json.JSONDecodeError:
                body = text
        result: dict[str, Any] = {
            "status": response.status_code,
            "content_type": content_type,
            "body": body,
            "truncated": truncated,
        }
        if response.is_redirect:
            result["location"] = response.headers.get("location", "")
        return result

    async def get(self, path: str, params: dict[str, str] | None = None) -> dict[str, Any]:
        """Send a GET request to the API and return its status and body.

        Args:
            path: Path under the API's base URL, e.g. /orders/58213.
            params: Query parameters.
        """
        return await self._request("GET", path, params=params, body=None)

    async def post(self, path: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
        """Send a POST request with a JSON body to the API and return its status and body.

        Args:
            path: Path under the API's base URL, e.g. /orders.
            body: The JSON object to send.
        """
        return await self._request("POST", path, params=None, body=body)

    def tools(self) -> list[Tool]:
        """``<name>_get`` and/or ``<name>_post``, described with the base URL."""
        made = []
        if "GET" in self.methods:
            made.append(
                tool(
                    self.get, name=f"{self.name}_get", description=f"GET a path under {self.base}."
                )
            )
        if "POST" in self.methods:
            made.append(
                tool(
                    self.post,
                    name=f"{self.name}_post",
                    description=f"POST a JSON object to a path under {self.base}.",
                )
            )
        return made


def http_tools(
    base_url: str,
    *,
    name: str = "http",
    methods: Sequence[str] = _METHODS,
    timeout: float = 10.0,
    max_bytes: int = 200_000,
    headers: Mapping[str, str] | None = None,
    transport: httpx.AsyncBaseTransport | None = None,
) -> list[Tool]:
    """GET/POST tools that can reach ``base_url`` and the paths below it, nothing else."""
    return HttpTools(
        base_url,
        name=name,
        methods=methods,
        timeout=timeout,
        max_bytes=max_bytes,
        headers=headers,
        transport=transport,
    ).tools()
