"""`import agentflow` stays light: torch loads only when the engine is used."""

from __future__ import annotations

import subprocess
import sys


def _modules_after(code: str) -> set[str]:
    out = subprocess.run(
        [sys.executable, "-c", f"{code}\nimport sys; print('\\n'.join(sys.modules))"],
        capture_output=True,
        text=True,
        check=True,
    )
    return set(out.stdout.split())


def test_import_agentflow_does_not_import_torch() -> None:
    loaded = _modules_after(
        "import agentflow\nfrom agentflow.action_schema import build_action_schema"
    )
    assert "torch" not in loaded


def test_engine_names_resolve_on_first_use() -> None:
    loaded = _modules_after(
        "import agentflow.engine as e\nassert e.DiffusionEngine.__name__ == 'DiffusionEngine'"
    )
    assert "torch" in loaded
    assert "agentflow.engine.sampler" in loaded
