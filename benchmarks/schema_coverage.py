"""Which JSONSchemaBench schemas the front end compiles, and why the others are refused.

For each schema of the JSONSchemaBench sample (and, with ``--suite``, the JSON Schema
Test Suite draft 2020-12): compile it, and with ``--check`` match every test instance
(compact JSON) against the regex — an invalid instance that matches is a soundness
failure. Prints the per-subset table and the most common refusal reasons, and writes
``benchmarks/results/schema_coverage.json``.

Usage: ``python benchmarks/schema_coverage.py [--check] [--suite] [--max-regex-chars N]``.
"""

from __future__ import annotations

import argparse
import json
import re
import time
from collections import Counter
from pathlib import Path
from typing import Any

from agentflow.engine.chat_template import compact_json
from agentflow.engine.constraints import compile_json_schema
from agentflow.engine.constraints.schema import DEFAULT_MAX_REGEX_CHARS
from agentflow.engine.errors import SchemaError

ROOT = Path(__file__).resolve().parents[1]
CONFORMANCE = ROOT / ".." / "shared" / "conformance"


def bench_cases() -> list[tuple[str, str, Any, list[tuple[Any, bool]]]]:
    """(subset, file name, schema, [(instance, valid)]) for the JSONSchemaBench sample."""
    cases = []
    for path in sorted((CONFORMANCE / "jsonschemabench-sample" / "data").glob("*.json")):
        doc = json.loads(path.read_text())
        stem = path.stem
        subset = stem.split("---")[0] if "---" in stem else stem.rsplit("_", 1)[0]
        tests = [(t["data"], t["valid"]) for t in doc["tests"]]
        cases.append((subset, path.name, doc["schema"], tests))
    return cases


def suite_cases() -> list[tuple[str, str, Any, list[tuple[Any, bool]]]]:
    """The JSON Schema Test Suite draft 2020-12 (optional tests included), one case a group."""
    root = CONFORMANCE / "json-schema-test-suite" / "tests" / "draft2020-12"
    cases = []
    for path in sorted(root.glob("*.json")) + sorted(root.glob("optional/**/*.json")):
        for group in json.loads(path.read_text()):
            tests = [(t["data"], t["valid"]) for t in group["tests"]]
            name = f"{path.relative_to(root)}: {group['description']}"
            cases.append(("test-suite", name, group["schema"], tests))
    return cases


def reason(exc: SchemaError) -> str:
    """A short grouping key for a refusal: keyword and message without the specifics."""
    msg = str(exc).split(" at ")[0]
    msg = re.sub(r"'[^']*'", "'…'", msg)
    msg = re.sub(r"\d+(\.\d+)?", "N", msg)
    return f"{exc.keyword or '-'}: {msg[:90]}"


def run(
    cases: list[tuple[str, str, Any, list[tuple[Any, bool]]]],
    *,
    check: bool,
    time_limit: float,
    max_regex_chars: int,
) -> dict[str, Any]:
    """Compile every case; per-subset counts, refusal reasons, soundness failures."""
    per: dict[str, Counter[str]] = {}
    reasons: Counter[str] = Counter()
    refused: dict[str, str] = {}
    unsound: list[str] = []
    times: list[float] = []
    for subset, name, schema, tests in cases:
        c = per.setdefault(subset, Counter())
        c["schemas"] += 1
        start = time.perf_counter()
        try:
            compiled = compile_json_schema(
                schema, time_limit=time_limit, max_regex_chars=max_regex_chars
            )
        except SchemaError as exc:
            reasons[reason(exc)] += 1
            refused[name] = str(exc)[:300]
            continue
        finally:
            times.append(time.perf_counter() - start)
        c["compiled"] += 1
        c["regex_chars"] += len(compiled.regex)
        if not check:
            continue
        for data, valid in tests:
            ok = compiled.matches(compact_json(data))
            if valid:
                c["valid"] += 1
                c["accepted"] += ok
            else:
                c["invalid"] += 1
                if ok:
                    unsound.append(f"{name}: {compact_json(data)[:120]}")
    times.sort()
    return {
        "per_subset": {k: dict(v) for k, v in sorted(per.items())},
        "schemas": sum(c["schemas"] for c in per.values()),
        "compiled": sum(c["compiled"] for c in per.values()),
        "reasons": reasons.most_common(),
        "refused": refused,
        "unsound": unsound,
        "compile_ms_median": 1000 * times[len(times) // 2] if times else None,
        "compile_ms_max": 1000 * times[-1] if times else None,
    }


def print_table(title: str, result: dict[str, Any], top: int) -> None:
    """The per-subset table and the ``top`` refusal reasons."""
    total, compiled = result["schemas"], result["compiled"]
    print(f"\n{title}: compiled {compiled}/{total} ({100 * compiled / max(total, 1):.1f}%)")
    print(f"{'subset':<24}{'compiled':>10}{'schemas':>9}{'share':>8}{'valid acc.':>14}{'inv.':>7}")
    for subset, c in result["per_subset"].items():
        acc = f"{c.get('accepted', 0)}/{c.get('valid', 0)}" if "valid" in c else "-"
        print(
            f"{subset:<24}{c.get('compiled', 0):>10}{c['schemas']:>9}"
            f"{100 * c.get('compiled', 0) / c['schemas']:>7.1f}%{acc:>14}{c.get('invalid', 0):>7}"
        )
    print(f"unsound (invalid instances matched): {len(result['unsound'])}")
    for line in result["unsound"][:20]:
        print("  UNSOUND", line)
    print(
        f"median compile {result['compile_ms_median']:.1f} ms, max {result['compile_ms_max']:.0f} ms"
    )
    print("top refusal reasons:")
    for why, n in result["reasons"][:top]:
        print(f"{n:6d}  {why}")


def main() -> None:
    """Run the coverage pass and write the JSON report."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="match every test instance")
    parser.add_argument("--suite", action="store_true", help="also the JSON Schema Test Suite")
    parser.add_argument("--time-limit", type=float, default=2.0)
    parser.add_argument("--max-regex-chars", type=int, default=DEFAULT_MAX_REGEX_CHARS)
    parser.add_argument("--top", type=int, default=40)
    parser.add_argument(
        "--out", type=Path, default=ROOT / "benchmarks" / "results" / "schema_coverage.json"
    )
    args = parser.parse_args()
    opts = {
        "check": args.check,
        "time_limit": args.time_limit,
        "max_regex_chars": args.max_regex_chars,
    }
    report: dict[str, Any] = {"options": opts}
    report["jsonschemabench"] = run(bench_cases(), **opts)
    print_table("JSONSchemaBench sample", report["jsonschemabench"], args.top)
    if args.suite:
        report["test_suite"] = run(suite_cases(), **opts)
        print_table("JSON Schema Test Suite 2020-12", report["test_suite"], args.top)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=1))
    print(f"\nwrote {args.out}")


if __name__ == "__main__":
    main()
