"""Dispatch: the package works without Triton, and forcing Triton where it cannot run is an error."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest
import torch

from agentflow.kernels import KernelBackendError, automaton_sweep, constrained_select


@pytest.mark.slow  # starts a fresh interpreter (torch import)
def test_importing_and_running_on_cpu_never_imports_triton() -> None:
    code = textwrap.dedent(
        """
        import sys
        import importlib.abc

        class HideTriton(importlib.abc.MetaPathFinder):
            def find_spec(self, name, path=None, target=None):
                if name == "triton" or name.startswith("triton."):
                    raise ImportError("triton hidden for this test")
                return None

        sys.meta_path.insert(0, HideTriton())
        import torch
        from agentflow.kernels import constrained_select
        tok, conf = constrained_select(torch.tensor([[0.0, 3.0, 1.0]]))
        assert tok.tolist() == [1], tok
        assert "triton" not in sys.modules
        print("ok")
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"


def test_forcing_triton_when_it_is_not_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    from agentflow.kernels import _backend

    monkeypatch.setattr(_backend, "triton_installed", lambda: False)
    with pytest.raises(KernelBackendError, match="not installed"):
        constrained_select(torch.zeros(1, 4), backend="triton")
    tok, _ = constrained_select(torch.tensor([[0.0, 1.0]]), backend="auto")
    assert tok.tolist() == [1]


def test_unknown_backend_is_named() -> None:
    with pytest.raises(ValueError, match="backend must be one of"):
        automaton_sweep(
            torch.zeros(1, 1, dtype=torch.int64),
            torch.ones(1, 1, dtype=torch.bool),
            torch.zeros(1, dtype=torch.int64),
            None,  # type: ignore[arg-type]
            backend="numpy",  # type: ignore[arg-type]
        )
