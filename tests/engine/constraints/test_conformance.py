"""Soundness of the schema compiler on the JSON Schema Test Suite and JSONSchemaBench.

For every schema that compiles, no invalid instance (compact JSON) may match:
soundness 100%, no exceptions. Every schema either compiles or raises
SchemaError within the time limit. The share of schemas compiled and of valid
instances accepted is written to the log (``pytest -s`` or ``-rA`` shows it).
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from agentflow.engine.chat_template import compact_json
from agentflow.engine.constraints import compile_json_schema
from agentflow.engine.constraints.schema import DEFAULT_MAX_REGEX_CHARS
from agentflow.engine.errors import SchemaError

#: Compiling and matching ~1,300 regexes of up to 100k characters with Python ``re`` takes
#: minutes on a loaded 2-core machine: more than the suite's default 300 s timeout.
pytestmark = [pytest.mark.conformance, pytest.mark.slow, pytest.mark.timeout(1800)]

_DEFAULT = Path(__file__).resolve().parents[3] / ".." / "shared" / "conformance"
CONFORMANCE = Path(os.environ.get("AGENTFLOW_CONFORMANCE", _DEFAULT))
#: The compiler's default limits, so the test checks every regex the defaults produce
#: (``benchmarks/schema_coverage.py`` prints the same table with refusal reasons).
TIME_LIMIT_S = 2.0
MAX_REGEX_CHARS = DEFAULT_MAX_REGEX_CHARS

log = logging.getLogger(__name__)


def _suite_cases() -> list[tuple[str, str, Any, list[tuple[Any, bool]]]]:
    root = CONFORMANCE / "json-schema-test-suite" / "tests" / "draft2020-12"
    cases = []
    for path in sorted(root.glob("*.json")) + sorted(root.glob("optional/**/*.json")):
        for group in json.loads(path.read_text()):
            tests = [(t["data"], t["valid"]) for t in group["tests"]]
            name = f"{path.relative_to(root)}: {group['description']}"
            cases.append(("test-suite", name, group["schema"], tests))
    return cases


def _bench_cases() -> list[tuple[str, str, Any, list[tuple[Any, bool]]]]:
    cases = []
    for path in sorted((CONFORMANCE / "jsonschemabench-sample" / "data").glob("*.json")):
        doc = json.loads(path.read_text())
        subset = (
            path.stem.split("---")[0].rsplit("_", 1)[0]
            if "---" not in path.stem
            else path.stem.split("---")[0]
        )
        tests = [(t["data"], t["valid"]) for t in doc["tests"]]
        cases.append((subset, path.name, doc["schema"], tests))
    return cases


def _run(cases: list[tuple[str, str, Any, list[tuple[Any, bool]]]]) -> dict[str, Counter[str]]:
    stats: dict[str, Counter[str]] = {}
    unsound: list[str] = []
    for subset, name, schema, tests in cases:
        c = stats.setdefault(subset, Counter())
        c["schemas"] += 1
        start = time.perf_counter()
        try:
            compiled = compile_json_schema(
                schema, time_limit=TIME_LIMIT_S, max_regex_chars=MAX_REGEX_CHARS
            )
        except SchemaError:
            c["refused"] += 1
            continue
        finally:
            # The limit is checked cooperatively; allow scheduling noise on a busy machine.
            assert time.perf_counter() - start < TIME_LIMIT_S * 10, f"{name}: compile hung"
        c["compiled"] += 1
        for data, valid in tests:
            text = compact_json(data)
            ok = compiled.matches(text)
            if valid:
                c["valid"] += 1
                c["accepted"] += ok
            else:
                c["invalid"] += 1
                if ok:
                    unsound.append(f"{name}: {text[:120]}")
    for subset, c in sorted(stats.items()):
        log.warning(
            "%-24s compiled %4d/%4d (%.1f%%)  valid accepted %4d/%4d  invalid rejected %d",
            subset,
            c["compiled"],
            c["schemas"],
            100 * c["compiled"] / c["schemas"],
            c["accepted"],
            c["valid"],
            c["invalid"],
        )
    assert not unsound, f"{len(unsound)} invalid instances matched:\n" + "\n".join(unsound[:20])
    return stats


@pytest.fixture(scope="module")
def conformance_root() -> Path:
    if not CONFORMANCE.is_dir():
        pytest.skip(f"conformance data not found at {CONFORMANCE} (set AGENTFLOW_CONFORMANCE)")
    return CONFORMANCE


def test_json_schema_test_suite_is_sound(conformance_root: Path) -> None:
    stats = _run(_suite_cases())
    assert stats["test-suite"]["compiled"] > 0


def test_jsonschemabench_sample_is_sound(conformance_root: Path) -> None:
    stats = _run(_bench_cases())
    total = sum(c["schemas"] for c in stats.values())
    compiled = sum(c["compiled"] for c in stats.values())
    log.warning(
        "JSONSchemaBench sample: %d/%d compiled (%.1f%%)", compiled, total, 100 * compiled / total
    )
    assert total == 1602
