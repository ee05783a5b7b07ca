"""StepBatcher: concurrent requests share engine calls; results and errors go to their owners."""

from __future__ import annotations

import threading

import anyio
import pytest

from agentflow.models.batcher import StepBatcher


class Recorder:
    """A run_batch that doubles numbers and records each call's jobs (negative jobs fail alone)."""

    def __init__(self, fail_all: bool = False) -> None:
        self.calls: list[list[int]] = []
        self.fail_all = fail_all
        self.threads: set[int] = set()

    def __call__(self, jobs: list[int]) -> list[int | Exception]:
        self.calls.append(list(jobs))
        self.threads.add(threading.get_ident())
        if self.fail_all:
            raise RuntimeError("engine exploded")
        return [ValueError(f"bad job {j}") if j < 0 else j * 2 for j in jobs]


async def submit_all(
    batcher: StepBatcher[int, int], jobs: list[int], keys: list[str] | None = None
) -> dict[int, object]:
    out: dict[int, object] = {}

    async def one(i: int, job: int) -> None:
        try:
            out[job] = await batcher.submit(job, key=keys[i] if keys else None)
        except Exception as exc:
            out[job] = exc

    async with anyio.create_task_group() as tg:
        for i, job in enumerate(jobs):
            tg.start_soon(one, i, job)
    return out


@pytest.mark.anyio
async def test_concurrent_jobs_share_one_call_in_a_worker_thread() -> None:
    run = Recorder()
    batcher = StepBatcher(run, window_s=0.01, max_batch=8)
    out = await submit_all(batcher, [1, 2, 3, 4])
    assert out == {1: (2, 4), 2: (4, 4), 3: (6, 4), 4: (8, 4)}
    assert run.calls == [[1, 2, 3, 4]]
    assert threading.get_ident() not in run.threads


@pytest.mark.anyio
async def test_max_batch_and_keys_split_calls() -> None:
    run = Recorder()
    batcher = StepBatcher(run, window_s=0.01, max_batch=2)
    out = await submit_all(batcher, [1, 2, 3, 4, 5], keys=["a", "b", "a", "a", "b"])
    assert {k: v[0] for k, v in out.items()} == {1: 2, 2: 4, 3: 6, 4: 8, 5: 10}
    assert sorted(map(sorted, run.calls)) == [[1, 3], [2, 5], [4]]
    assert batcher.batch_sizes == [2, 2, 1]


@pytest.mark.anyio
async def test_errors_reach_the_right_jobs() -> None:
    out = await submit_all(StepBatcher(Recorder(), window_s=0.005), [1, -1, 2])
    assert out[1] == (2, 3) and out[2] == (4, 3)
    assert isinstance(out[-1], ValueError) and str(out[-1]) == "bad job -1"
    out = await submit_all(StepBatcher(Recorder(fail_all=True), window_s=0.005), [1, 2])
    assert all(isinstance(v, RuntimeError) for v in out.values())


@pytest.mark.anyio
async def test_a_cancelled_leader_still_serves_the_others() -> None:
    run = Recorder()
    batcher = StepBatcher(run, window_s=0.05)
    results: list[object] = []

    async def follower() -> None:
        results.append(await batcher.submit(7))

    async with anyio.create_task_group() as tg:
        with anyio.move_on_after(0.01):  # the leader's caller gives up during the window
            tg.start_soon(follower)
            await batcher.submit(1)
    assert results == [(14, 2)]
    assert run.calls == [[1, 7]]


def test_bad_settings_are_rejected() -> None:
    with pytest.raises(ValueError, match="max_batch"):
        StepBatcher(Recorder(), max_batch=0)
    with pytest.raises(ValueError, match="window_s"):
        StepBatcher(Recorder(), window_s=-1)
