"""Benchmark the kernels side by side: fused reference / Triton against the unfused torch code.

    python benchmarks/kernels.py [--quick] [--device cpu|cuda] [--threads N] [--out benchmarks/results]

On the CPU it compares the reference path of each kernel with the unfused torch
code it replaces (``constrained_select``: softmax → mask → max, or → multinomial
when sampling; ``allowed_mask``: a dense [S, V] next-state table gathered per
state). On a GPU the Triton kernels join the table. Prints a table and writes
``kernels-<device>.json`` to ``--out``.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from functools import partial
from pathlib import Path

import torch

from agentflow.kernels import (
    SweepTables,
    allowed_mask,
    automaton_sweep,
    constrained_select,
    pack_bits,
    unpack_bits,
)


@dataclass
class Row:
    """One measured case: median milliseconds per implementation."""

    kernel: str
    case: str
    timings_ms: dict[str, float]

    def ratio(self, base: str, other: str) -> float | None:
        if base in self.timings_ms and other in self.timings_ms and self.timings_ms[other] > 0:
            return self.timings_ms[base] / self.timings_ms[other]
        return None


def _time(fn: Callable[[], object], device: torch.device, repeats: int) -> float:
    def sync() -> None:
        if device.type == "cuda":
            torch.cuda.synchronize()

    fn()
    sync()
    samples = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        sync()
        samples.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(samples)


def unfused_select(
    logits: torch.Tensor, allowed: torch.Tensor, temperature: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """What the fused kernel replaces: a full softmax, a mask, a renormalisation, then max/sample."""
    v = logits.shape[1]
    scale = temperature if temperature > 0 else 1.0
    probs = torch.softmax(logits.float() / scale, dim=-1)
    probs = probs * unpack_bits(allowed, v)
    probs = probs / probs.sum(-1, keepdim=True)
    if temperature > 0:
        token = torch.multinomial(probs, 1).squeeze(1)
        return token, probs.gather(1, token.unsqueeze(1)).squeeze(1)
    conf, token = probs.max(-1)
    return token, conf


def bench_select(device: torch.device, quick: bool, triton: bool, repeats: int) -> list[Row]:
    rows = []
    shapes = (
        [(32, 32_000), (256, 32_000)]
        if quick
        else [(32, 32_000), (256, 32_000), (32, 128_000), (512, 128_000)]
    )
    for n, v in shapes:
        for dtype in (torch.float32, torch.bfloat16):
            for temperature in (0.0, 1.0):
                g = torch.Generator().manual_seed(n + v)
                logits = torch.randn(n, v, generator=g).to(device=device, dtype=dtype)
                allowed = pack_bits(torch.rand(n, v, generator=g) < 0.05).to(device)
                impls: dict[str, Callable[[], object]] = {
                    "unfused": partial(unfused_select, logits, allowed, temperature),
                    "reference": partial(
                        constrained_select, logits, allowed, temperature, 1, backend="torch"
                    ),
                }
                if triton:
                    impls["triton"] = partial(
                        constrained_select, logits, allowed, temperature, 1, backend="triton"
                    )
                case = f"N={n} V={v} {str(dtype).removeprefix('torch.')} T={temperature:g}"
                rows.append(
                    Row(
                        "constrained_select",
                        case,
                        {k: _time(f, device, repeats) for k, f in impls.items()},
                    )
                )
    return rows


def _random_tables(
    states: int, vocab: int, density: float, device: torch.device
) -> tuple[SweepTables, torch.Tensor]:
    g = torch.Generator().manual_seed(states)
    present = torch.rand(states, vocab, generator=g) < density
    target = torch.randint(0, states, (states, vocab), generator=g)
    src, tok = torch.nonzero(present, as_tuple=True)
    offsets = torch.zeros(states + 1, dtype=torch.int64)
    offsets[1:] = torch.cumsum(present.sum(1), 0)
    table = torch.where(present, target, -1)
    tables = SweepTables.from_transitions(
        states,
        vocab,
        offsets,
        tok.to(torch.int32),
        target[src, tok].to(torch.int32),
        torch.ones(states, dtype=torch.bool),
    )
    moved = SweepTables(
        **{
            k: (x.to(device) if isinstance(x, torch.Tensor) else x)
            for k, x in tables.__dict__.items()
        }
    )
    return moved, table.to(device)


def dense_mask(fwd: torch.Tensor, bwd: torch.Tensor, table: torch.Tensor) -> torch.Tensor:
    """The unfused alternative: gather a dense [S, V] table row per state in the forward set."""
    s, v = table.shape
    f, b = unpack_bits(fwd, s), unpack_bits(bwd, s)
    out = torch.zeros(fwd.shape[0], v, dtype=torch.bool, device=fwd.device)
    for p in range(fwd.shape[0]):
        nxt = table[f[p]]
        ok = (nxt >= 0) & b[p][nxt.clamp(min=0)]
        out[p] = ok.any(0)
    return pack_bits(out)


def bench_sweep_and_mask(
    device: torch.device, quick: bool, triton: bool, repeats: int
) -> list[Row]:
    rows = []
    cases = [(64, 4_000, 32)] if quick else [(64, 4_000, 32), (512, 32_000, 32)]
    for states, vocab, length in cases:
        tables, table = _random_tables(states, vocab, 0.02, device)
        g = torch.Generator().manual_seed(1)
        tokens = torch.randint(0, vocab, (1, length), generator=g).to(device)
        masked = (torch.rand(1, length, generator=g) < 0.7).to(device)
        entry = torch.zeros(1, dtype=torch.int64, device=device)
        impls: dict[str, Callable[[], object]] = {
            "reference": partial(automaton_sweep, tokens, masked, entry, tables, backend="torch")
        }
        if triton:
            impls["triton"] = partial(
                automaton_sweep, tokens, masked, entry, tables, backend="triton"
            )
        case = f"S={states} V={vocab} L={length}"
        rows.append(
            Row("automaton_sweep", case, {k: _time(f, device, repeats) for k, f in impls.items()})
        )
        fwd, bwd = automaton_sweep(tokens, masked, entry, tables, backend="torch")
        pos = torch.nonzero(masked[0]).flatten()
        f, b = fwd[0, pos], bwd[0, pos + 1]
        impls = {
            "unfused": partial(dense_mask, f, b, table),
            "reference": partial(allowed_mask, f, b, tables, backend="torch"),
        }
        if triton:
            impls["triton"] = partial(allowed_mask, f, b, tables, backend="triton")
        rows.append(
            Row(
                "allowed_mask",
                f"{case} P={pos.numel()}",
                {k: _time(fn, device, repeats) for k, fn in impls.items()},
            )
        )
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer, smaller cases")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument(
        "--threads", type=int, default=0, help="torch CPU threads (default: torch's own choice)"
    )
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "results")
    args = parser.parse_args(argv)
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    triton = device.type == "cuda"
    rows = bench_select(device, args.quick, triton, args.repeats)
    rows += bench_sweep_and_mask(device, args.quick, triton, args.repeats)

    names = ["unfused", "reference", "triton"]
    header = (
        f"{'kernel':<19}{'case':<34}"
        + "".join(f"{n + ' ms':>14}" for n in names)
        + f"{'unfused/ref':>13}{'ref/triton':>12}"
    )
    lines = [header, "-" * len(header)]
    for r in rows:
        cells = "".join(
            f"{r.timings_ms[n]:>14.3f}" if n in r.timings_ms else f"{'-':>14}" for n in names
        )
        ratios = [r.ratio("unfused", "reference"), r.ratio("reference", "triton")]
        cells += "".join(f"{x:>12.2f}x" if x is not None else f"{'-':>13}" for x in ratios[:1])
        cells += "".join(f"{x:>11.2f}x" if x is not None else f"{'-':>12}" for x in ratios[1:])
        lines.append(f"{r.kernel:<19}{r.case:<34}{cells}")
    sys.stdout.write("\n".join(lines) + "\n")

    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / f"kernels-{device.type}.json"
    meta = {
        "device": torch.cuda.get_device_name(device)
        if triton
        else platform.processor() or platform.machine(),
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "repeats": args.repeats,
        "quick": args.quick,
    }
    path.write_text(json.dumps({"meta": meta, "rows": [asdict(r) for r in rows]}, indent=2))
    sys.stdout.write(f"wrote {path}\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
