"""Run an ASGI app under uvicorn in a background thread (tests, notebooks, embedding)."""

from __future__ import annotations

import threading
import time
from types import TracebackType
from typing import Any

import uvicorn


class BackgroundServer:
    """``with BackgroundServer(app) as server: ... server.url ...`` — port 0 picks a free port."""

    def __init__(
        self,
        app: Any,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        log_level: str = "warning",
        startup_timeout: float = 10.0,
    ) -> None:
        config = uvicorn.Config(app, host=host, port=port, log_level=log_level, lifespan="off")
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=self._server.run, name="agentflow-server", daemon=True
        )
        self._host = host
        self._startup_timeout = startup_timeout
        self.port = port

    @property
    def url(self) -> str:
        """Base URL, e.g. ``http://127.0.0.1:54321``."""
        return f"http://{self._host}:{self.port}"

    def start(self) -> BackgroundServer:
        self._thread.start()
        deadline = time.monotonic() + self._startup_timeout
        while not self._server.started:
            if not self._thread.is_alive():
                raise RuntimeError(f"the server on {self._host}:{self.port} failed to start")
            if time.monotonic() > deadline:
                self.stop()
                raise TimeoutError(f"the server did not start within {self._startup_timeout}s")
            time.sleep(0.01)
        self.port = self._server.servers[0].sockets[0].getsockname()[1]
        return self

    def stop(self) -> None:
        self._server.should_exit = True
        if self._thread.is_alive():
            self._thread.join(timeout=10)

    def __enter__(self) -> BackgroundServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
