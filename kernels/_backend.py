"""Backend selection shared by the dispatch functions: Triton on CUDA, the reference elsewhere."""

from __future__ import annotations

import importlib.util
import os
from typing import Literal

import torch

Backend = Literal["auto", "triton", "torch"]
_BACKENDS = ("auto", "triton", "torch")


class KernelBackendError(RuntimeError):
    """A kernel backend was requested that cannot run here."""


def triton_installed() -> bool:
    """True when the ``triton`` package can be imported."""
    return importlib.util.find_spec("triton") is not None


def interpreting() -> bool:
    """True when Triton runs in interpreter mode (``TRITON_INTERPRET=1``), i.e. on CPU tensors."""
    return os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")


def resolve_backend(backend: str, device: torch.device) -> Literal["triton", "torch"]:
    """Map ``backend`` to the implementation to run for tensors on ``device``.

    ``auto`` picks Triton on CUDA when Triton is installed and the reference
    elsewhere. ``triton`` forces Triton: it needs a CUDA device, or the
    interpreter (``TRITON_INTERPRET=1``) for CPU tensors.
    """
    if backend not in _BACKENDS:
        raise ValueError(f"backend must be one of {_BACKENDS}, got {backend!r}")
    if backend == "torch":
        return "torch"
    if backend == "auto":
        return "triton" if device.type == "cuda" and triton_installed() else "torch"
    if not triton_installed():
        raise KernelBackendError("backend='triton' requested but triton is not installed")
    if device.type != "cuda" and not interpreting():
        raise KernelBackendError(
            f"backend='triton' needs CUDA tensors (got {device.type}) "
            "or TRITON_INTERPRET=1 to run Triton on the CPU"
        )
    return "triton"
