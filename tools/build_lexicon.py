"""Build the conflict detector's lexical resource from WordNet 3.0's database files.

Writes ``src/engram/memory/conflict/wordnet_lexicon.txt``: one line per entry, tab-separated,
``antonym<TAB>word<TAB>word`` for every direct antonym pair WordNet lists (adjectives, verbs,
adverbs and nouns, single words only) and ``change<TAB>verb`` for every single-word verb of
WordNet's ``verb.change`` lexicographer file (verbs of changing state: "replace", "upgrade",
"relocate" ...). The file is committed, so the kernel needs WordNet only to rebuild it:

    apt-get install wordnet-base
    python tools/build_lexicon.py [--wordnet DIR]

WordNet 3.0 Copyright 2006 by Princeton University (licence in the file's header).
"""

from __future__ import annotations

import argparse
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "src" / "engram" / "memory" / "conflict" / "wordnet_lexicon.txt"
VERB_CHANGE = 30  # lexicographer file number of verb.change
HEADER = """\
# Derived from WordNet 3.0 by tools/build_lexicon.py; do not edit by hand.
# WordNet 3.0 Copyright 2006 by Princeton University. All rights reserved.
# Permission to use, copy, modify and distribute this software and database and its
# documentation for any purpose and without fee or royalty is hereby granted, provided that
# the copyright notice and statements, including the disclaimer, appear on all copies.
# THIS SOFTWARE AND DATABASE IS PROVIDED "AS IS" AND PRINCETON UNIVERSITY MAKES NO
# REPRESENTATIONS OR WARRANTIES, EXPRESS OR IMPLIED. BY WAY OF EXAMPLE, BUT NOT LIMITATION,
# PRINCETON UNIVERSITY MAKES NO REPRESENTATIONS OR WARRANTIES OF MERCHANTABILITY OR FITNESS
# FOR ANY PARTICULAR PURPOSE OR THAT THE USE OF THE LICENSED SOFTWARE, DATABASE OR
# DOCUMENTATION WILL NOT INFRINGE ANY THIRD PARTY PATENTS, COPYRIGHTS, TRADEMARKS OR OTHER
# RIGHTS.
"""


def _synsets(path: Path) -> dict[str, tuple[int, list[str], list[tuple[str, str, str]]]]:
    """Offset -> (lexicographer file, words, pointers (symbol, target offset, source/target))."""
    synsets = {}
    for line in path.read_text(encoding="latin-1").splitlines():
        if line.startswith("  "):  # the licence at the top of every data file
            continue
        fields = line.split(" ")
        offset, lexfile, count = fields[0], int(fields[1]), int(fields[3], 16)
        words = [fields[4 + 2 * i].split("(")[0].lower() for i in range(count)]
        at = 4 + 2 * count
        pointers = []
        for i in range(int(fields[at])):
            symbol, target, _pos, source_target = fields[at + 1 + 4 * i : at + 5 + 4 * i]
            pointers.append((symbol, target, source_target))
        synsets[offset] = (lexfile, words, pointers)
    return synsets


def build(wordnet: Path) -> list[str]:
    """The lexicon's lines, sorted."""
    lines: set[str] = set()
    for part in ("adj", "verb", "adv", "noun"):
        synsets = _synsets(wordnet / f"data.{part}")
        for lexfile, words, pointers in synsets.values():
            if part == "verb" and lexfile == VERB_CHANGE:
                lines.update(f"change\t{w}" for w in words if w.isalpha())
            for symbol, target, source_target in pointers:
                if symbol != "!" or target not in synsets:
                    continue
                source = words[int(source_target[:2], 16) - 1]
                other = synsets[target][1][int(source_target[2:], 16) - 1]
                if source.isalpha() and other.isalpha():
                    lines.add("antonym\t" + "\t".join(sorted((source, other))))
    return sorted(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--wordnet", type=Path, default=Path("/usr/share/wordnet"))
    args = parser.parse_args()
    lines = build(args.wordnet)
    OUT.write_text(HEADER + "\n".join(lines) + "\n", encoding="utf-8")
    print(f"{OUT.relative_to(ROOT)}: {len(lines)} entries")


if __name__ == "__main__":
    main()
