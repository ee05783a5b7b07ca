"""Batch concurrent model steps into one engine call (DESIGN §8).

Many runs share one event loop; each step of each run asks the engine for one
generation. :class:`StepBatcher` collects the requests that arrive within a short
window and hands them to a synchronous ``run_batch`` function in a worker thread,
so one ``generate`` call serves them all and the event loop stays free.

There is no background task: the first request of a window *leads* — it waits the
window, runs the batch (shielded from cancellation, so the others are always
served), and if more requests queued meanwhile, passes the lead to the oldest of
them. One batch runs at a time; requests with different ``key`` (e.g. decoding
mode and generation settings) go in separate engine calls.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

import anyio
import anyio.to_thread

JobT = TypeVar("JobT")
ResultT = TypeVar("ResultT")


@dataclass(eq=False)
class _Slot(Generic[JobT, ResultT]):
    job: JobT
    key: Hashable
    done: anyio.Event = field(default_factory=anyio.Event)
    wake: anyio.Event = field(default_factory=anyio.Event)
    result: Any = None
    error: BaseException | None = None
    lead: bool = False


class StepBatcher(Generic[JobT, ResultT]):
    """Collect jobs for ``window_s`` seconds (at most ``max_batch`` per call) and run them together.

    ``run_batch`` returns one result per job, or an exception instance for a job that failed
    alone; an exception it raises fails every job of the call.
    """

    def __init__(
        self,
        run_batch: Callable[[list[JobT]], list[ResultT | Exception]],
        *,
        window_s: float = 0.002,
        max_batch: int = 16,
    ) -> None:
        if window_s < 0:
            raise ValueError(f"window_s must be >= 0, got {window_s}")
        if max_batch < 1:
            raise ValueError(f"max_batch must be >= 1, got {max_batch}")
        self.run_batch = run_batch
        self.window_s = window_s
        self.max_batch = max_batch
        self._pending: list[_Slot[JobT, ResultT]] = []
        self._leading = False
        #: Sizes of the engine calls made so far (for stats and tests).
        self.batch_sizes: list[int] = []

    async def submit(self, job: JobT, key: Hashable = None) -> tuple[ResultT, int]:
        """Run ``job`` (batched with others of the same ``key``); returns (result, batch size)."""
        slot: _Slot[JobT, ResultT] = _Slot(job=job, key=key)
        self._pending.append(slot)
        if not self._leading:
            self._leading = True
            slot.lead = True
        while not slot.done.is_set():
            if slot.lead:
                slot.lead = False
                with anyio.CancelScope(shield=True):
                    await self._lead()
            else:
                await slot.wake.wait()
                slot.wake = anyio.Event()
        if slot.error is not None:
            raise slot.error
        return slot.result

    async def _lead(self) -> None:
        """Run one batch; pass the lead on if requests are still waiting."""
        try:
            if self.window_s > 0:
                await anyio.sleep(self.window_s)
            first = self._pending[0].key
            batch = [s for s in self._pending if s.key == first][: self.max_batch]
            chosen = set(map(id, batch))
            self._pending = [s for s in self._pending if id(s) not in chosen]
            self.batch_sizes.append(len(batch))
            try:
                results = await anyio.to_thread.run_sync(self.run_batch, [s.job for s in batch])
                if len(results) != len(batch):
                    raise RuntimeError(
                        f"run_batch returned {len(results)} results for {len(batch)} jobs"
                    )
                for slot, result in zip(batch, results, strict=True):
                    if isinstance(result, Exception):  # this job alone failed
                        slot.error = result
                    else:
                        slot.result = (result, len(batch))
            except Exception as exc:  # every job of the failed call gets the error
                for slot in batch:
                    slot.error = exc
            for slot in batch:
                slot.done.set()
                slot.wake.set()
        finally:
            if self._pending:
                heir = self._pending[0]
                heir.lead = True
                heir.wake.set()
            else:
                self._leading = False
