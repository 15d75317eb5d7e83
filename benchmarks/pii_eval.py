"""PII screening quality and speed on the labelled corpus.

Prints one JSON object. Each corpus line is ``label<TAB>text``, where the label is a
comma-separated list of expected kinds or ``none``; lines starting with ``#`` are comments.

- An expected kind counts as found when ``scan`` reports at least one finding of that kind on
  the line (recall is per line and kind).
- A false positive is a kind reported on a line whose label does not list it (per kind:
  ``false_positives``). The false-positive rate is the share of ``none`` lines with any
  finding at all; ``false_positive_lines`` also counts positive lines with an extra kind.
- Precision is found kinds / all reported (line, kind) pairs.
- Latency is the wall time of one ``scan`` call, over every line of the corpus repeated
  ``--repeat`` times.

- The line recall is the share of positive lines with any finding at all: such a record is
  quarantined whatever kind was reported, so it is the figure that decides whether personal
  data reaches other agents.

Halves (``--half``): ``test`` (the default) reads ``tests/data/pii/test_*.tsv``, written by
two writers the rules were never shown; ``dev`` reads ``tests/data/pii/dev_*.tsv``, two other
writers whose misses the rules were written from; ``legacy`` reads
``tests/data/pii_corpus.tsv``, the corpus the first detector was written against
(``tests/data/pii/README.md`` has the provenance).

    python -m benchmarks.pii_eval [--half test|dev|legacy | --corpus PATH] [--repeat 20]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path
from typing import Any

from engram.memory.gate.pii import DETECTOR, DETECTOR_VERSION, PiiKind, scan

DATA = Path(__file__).resolve().parent.parent / "tests" / "data"
HALVES: dict[str, tuple[Path, ...]] = {
    "test": (DATA / "pii" / "test_k.tsv", DATA / "pii" / "test_m.tsv"),
    "dev": tuple(
        DATA / "pii" / f"dev_{writer}.tsv"
        for writer in (
            *"lnopqrstuvwxyz",
            "aa",
            "bb",
            "cc",
            "dd",
            "ee",
            "ff",
            "gg",
            "hh",
            "ii",
            "jj",
            "kk",
            "ll",
            "mm",
            "nn",
            "oo",
            "pp",
            "qq",
            "rr",
            "ss",
            "tt",
        )
    ),
    "legacy": (DATA / "pii_corpus.tsv",),
}
RECALL_GOAL = 0.97
FP_RATE_GOAL = 0.02


def load_corpus(path: Path) -> list[tuple[frozenset[PiiKind], str]]:
    """The ``(expected kinds, text)`` cases of a corpus file; ``none`` gives an empty set."""
    cases: list[tuple[frozenset[PiiKind], str]] = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip() or line.startswith("#"):
            continue
        label, sep, text = line.partition("\t")
        if not sep:
            raise SystemExit(f"{path}:{number}: expected label<TAB>text")
        kinds = frozenset() if label == "none" else frozenset(PiiKind(k) for k in label.split(","))
        cases.append((kinds, text))
    return cases


def _percentile(sorted_values: list[float], q: float) -> float:
    index = min(len(sorted_values) - 1, round(q * (len(sorted_values) - 1)))
    return sorted_values[index]


def evaluate(cases: list[tuple[frozenset[PiiKind], str]], repeat: int) -> dict[str, Any]:
    """Quality counts per kind and overall, and scan latency percentiles."""
    per_kind = {kind: {"expected": 0, "found": 0, "false_positives": 0} for kind in PiiKind}
    negatives = [text for kinds, text in cases if not kinds]
    negatives_flagged = 0
    positives_flagged = 0
    false_positive_lines = 0
    reported_pairs = 0
    for expected, text in cases:
        reported = {finding.kind for finding in scan(text)}
        reported_pairs += len(reported)
        if not expected and reported:
            negatives_flagged += 1
        if expected and reported:
            positives_flagged += 1
        if reported - expected:
            false_positive_lines += 1
        for kind in expected:
            per_kind[kind]["expected"] += 1
            per_kind[kind]["found"] += kind in reported
        for kind in reported - expected:
            per_kind[kind]["false_positives"] += 1

    timings: list[float] = []
    for _ in range(repeat):
        for _, text in cases:
            started = time.perf_counter()
            scan(text)
            timings.append((time.perf_counter() - started) * 1e6)
    timings.sort()

    expected_total = sum(k["expected"] for k in per_kind.values())
    found_total = sum(k["found"] for k in per_kind.values())
    recall = found_total / expected_total if expected_total else 1.0
    fp_rate = negatives_flagged / len(negatives) if negatives else 0.0
    precision = found_total / reported_pairs if reported_pairs else 1.0
    positives = len(cases) - len(negatives)
    line_recall = positives_flagged / positives if positives else 1.0
    return {
        "per_kind": {
            str(kind): {
                **counts,
                "recall": round(counts["found"] / counts["expected"], 4)
                if counts["expected"]
                else None,
            }
            for kind, counts in per_kind.items()
        },
        "overall": {
            "line_recall": round(line_recall, 4),
            "recall": round(recall, 4),
            "false_positive_rate": round(fp_rate, 4),
            "negatives_flagged": negatives_flagged,
            "false_positive_lines": false_positive_lines,
            "precision": round(precision, 4),
        },
        "latency_us": {
            "samples": len(timings),
            "p50": round(_percentile(timings, 0.50), 1),
            "p95": round(_percentile(timings, 0.95), 1),
            "p99": round(_percentile(timings, 0.99), 1),
            "mean": round(statistics.fmean(timings), 1),
        },
        "goals": {
            f"recall>={RECALL_GOAL}": recall >= RECALL_GOAL,
            f"false_positive_rate<={FP_RATE_GOAL}": fp_rate <= FP_RATE_GOAL,
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    which = parser.add_mutually_exclusive_group()
    which.add_argument("--half", choices=sorted(HALVES), default="test")
    which.add_argument("--corpus", type=Path, help="one labelled file instead of a half")
    parser.add_argument("--repeat", type=int, default=20, help="corpus passes for timing")
    args = parser.parse_args()
    files = (args.corpus,) if args.corpus else HALVES[args.half]
    cases = [case for path in files for case in load_corpus(path)]
    positives = sum(1 for kinds, _ in cases if kinds)
    result = {
        "parameters": {
            "half": None if args.corpus else args.half,
            "corpus": [str(path.relative_to(DATA.parent.parent)) for path in files]
            if not args.corpus
            else [str(args.corpus)],
            "lines": len(cases),
            "positives": positives,
            "negatives": len(cases) - positives,
            "detector": DETECTOR,
            "detector_version": DETECTOR_VERSION,
            "timing_repeat": args.repeat,
        },
        **evaluate(cases, args.repeat),
    }
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
