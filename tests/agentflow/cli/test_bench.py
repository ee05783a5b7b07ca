"""``agentflow bench``: list and run benchmark scripts by name, arguments passed through."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentflow.cli import main


@pytest.fixture
def bench_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "benchmarks"
    folder.mkdir()
    (folder / "echo_args.py").write_text(
        '"""Echo the arguments (test benchmark)."""\nimport sys\nprint(" ".join(sys.argv[1:]))\nsys.exit(4)\n'
    )
    (folder / "_private.py").write_text("")
    monkeypatch.setenv("AGENTFLOW_BENCHMARKS", str(folder))
    return folder


def test_lists_benchmarks(bench_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "--list"]) == 0
    out = capsys.readouterr().out
    assert "echo_args" in out and "Echo the arguments" in out and "_private" not in out


def test_runs_a_benchmark_with_its_arguments(
    bench_dir: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    assert main(["bench", "echo_args", "--steps", "3", "--help"]) == 4
    assert capfd.readouterr().out.strip() == "--steps 3 --help"


def test_unknown_benchmark(bench_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "nope"]) == 2
    assert "unknown benchmark 'nope' (available: echo_args)" in capsys.readouterr().err
