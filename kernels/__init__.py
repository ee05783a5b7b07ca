"""Triton kernels of the constrained denoising step, each with a PyTorch reference and a dispatch.

``agentflow.kernels`` imports only torch; Triton is imported lazily by a dispatch
function that picks it (CUDA tensors, or ``backend="triton"``).
"""

from __future__ import annotations

from ._backend import Backend, KernelBackendError
from .allowed_mask import allowed_mask, allowed_mask_reference
from .automaton_sweep import automaton_sweep, automaton_sweep_reference
from .bitmask import num_words, pack_bits, unpack_bits
from .constrained_select import constrained_select, constrained_select_reference
from .sweep_tables import SweepTables

__all__ = [
    "Backend",
    "KernelBackendError",
    "SweepTables",
    "allowed_mask",
    "allowed_mask_reference",
    "automaton_sweep",
    "automaton_sweep_reference",
    "constrained_select",
    "constrained_select_reference",
    "num_words",
    "pack_bits",
    "unpack_bits",
]
