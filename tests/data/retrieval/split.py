"""Split queries.jsonl into dev.jsonl and test.jsonl, stratified by query style.

Standard library only. For each style (sorted by name) the queries of that style are
shuffled with a fresh ``random.Random(20261126)`` and cut in half; when a style has an
odd number of queries the extra one goes to dev. Both output files keep the line format
of queries.jsonl and are written in query-id order. memories.jsonl is not split: both
halves are evaluated against the same store.

Usage: python split.py   (reads and writes next to this file)
"""

from __future__ import annotations

import json
import random
from collections import defaultdict
from pathlib import Path

SEED = 20261126
HERE = Path(__file__).resolve().parent


def main() -> None:
    """Write dev.jsonl and test.jsonl next to this file."""
    lines = (HERE / "queries.jsonl").read_text(encoding="utf-8").splitlines()
    queries = [json.loads(line) for line in lines if line.strip()]
    by_style: dict[str, list[dict]] = defaultdict(list)
    for query in queries:
        by_style[query["style"]].append(query)

    dev: list[dict] = []
    test: list[dict] = []
    for style in sorted(by_style):
        group = sorted(by_style[style], key=lambda q: q["id"])
        random.Random(SEED).shuffle(group)  # noqa: S311 - a reproducible split, not a secret
        cut = (len(group) + 1) // 2  # dev gets the extra one
        dev.extend(group[:cut])
        test.extend(group[cut:])
        print(f"{style:<11} total {len(group):>3}  dev {cut:>3}  test {len(group) - cut:>3}")

    for name, part in (("dev.jsonl", dev), ("test.jsonl", test)):
        part.sort(key=lambda q: q["id"])
        with open(HERE / name, "w", encoding="utf-8") as out:
            for query in part:
                out.write(json.dumps(query, ensure_ascii=False) + "\n")
    print(f"dev {len(dev)}  test {len(test)}")


if __name__ == "__main__":
    main()
