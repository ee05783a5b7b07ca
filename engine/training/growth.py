"""A deeper model from a trained one: new layers that start as the identity.

Block expansion (LLaMA Pro, Wu et al. 2024): a trained stack of ``n`` layers
becomes one of ``n + k`` by inserting, after ``k`` evenly spaced layers, a copy
of that layer whose two output projections (the attention's ``wo`` and the
feed-forward's ``w2``) are zero. A zeroed block adds nothing to the residual
stream, so the grown model computes exactly what the trained one did; training
then gives the new layers their own work, starting from features that already
fit their place in the stack. It is how a run buys capacity without throwing
away what the smaller model learned (docs/models.md says what it bought).
"""

from __future__ import annotations

import re

import torch

_LAYER = re.compile(r"^layers\.(\d+)\.(.+)$")
#: The per-layer weights that write into the residual stream.
_OUTPUTS = ("attention.wo.weight", "feed_forward.w2.weight")


def expanded_after(source_layers: int, target_layers: int) -> list[int]:
    """The source layers that get a zeroed copy right after them, evenly spaced:
    4 → 6 copies layers 1 and 3."""
    extra = target_layers - source_layers
    if not 0 < extra <= source_layers:
        raise ValueError(
            f"growth goes from {source_layers} layers to more, at most twice as many; "
            f"got {target_layers}"
        )
    return [(k + 1) * source_layers // extra - 1 for k in range(extra)]


def grown_state(
    source: dict[str, torch.Tensor], source_layers: int, target_layers: int
) -> dict[str, torch.Tensor]:
    """The state dict of a ``target_layers``-deep model from ``source``'s (same width),
    as the module docstring says; the embeddings, final norm and output are kept."""
    after = set(expanded_after(source_layers, target_layers))
    per_layer: dict[int, dict[str, torch.Tensor]] = {}
    out: dict[str, torch.Tensor] = {}
    for name, tensor in source.items():
        m = _LAYER.match(name)
        if m is None:
            out[name] = tensor.clone()
        else:
            per_layer.setdefault(int(m.group(1)), {})[m.group(2)] = tensor
    if sorted(per_layer) != list(range(source_layers)):
        raise ValueError(f"the source holds layers {sorted(per_layer)}, not {source_layers}")
    target = 0
    for i in range(source_layers):
        for rest, tensor in per_layer[i].items():
            out[f"layers.{target}.{rest}"] = tensor.clone()
        target += 1
        if i in after:
            for rest, tensor in per_layer[i].items():
                copy = tensor.clone()
                if rest in _OUTPUTS:
                    copy.zero_()
                out[f"layers.{target}.{rest}"] = copy
            target += 1
    return out
