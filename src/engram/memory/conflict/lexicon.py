"""The lexical resource behind the conflict features: WordNet's antonyms and change verbs.

``wordnet_lexicon.txt`` beside this module is generated from WordNet 3.0 by
``tools/build_lexicon.py`` and committed, so nothing is read from outside the package at run
time. Words are stored as :func:`engram.memory.conflict.cues.stem` stems, the form the
statement parser produces, so "disabled" meets "enabled" whatever the inflection.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from importlib import resources

from engram.memory.conflict.cues import stem
from engram.memory.conflict.memo import per_text

#: Words by which a statement says the world changed: relocation and switching ("moved",
#: "migrated"), a replacement ("instead", "no longer", "anymore"), a start ("since", "from now
#: on", "as of", "effective"), a new slot ("rescheduled", "postponed"), a retirement. WordNet's
#: ``verb.change`` file is far broader ("keep", "run", "stay" are in it): it is a classifier
#: feature, never a rule.
CHANGE_MARKERS = frozenset(
    stem(w)
    for w in (
        "moved", "migrated", "switched", "replaced", "renamed", "upgraded", "downgraded",
        "instead", "anymore", "longer", "since", "henceforth", "onwards", "onward", "now",
        "nowadays", "retired", "deprecated", "withdrawn", "discontinued", "decommissioned",
        "reassigned", "transferred", "relocated", "rescheduled", "postponed", "changed",
        "raised", "lowered", "bumped", "reimaged", "rebranded", "superseded", "again",
        "effective", "today", "reopened", "reverted", "replacing", "sunset", "sunsetted",
    )
)  # fmt: skip


_VERB_OF_CHANGE = (
    "moved|switched|migrated|changed|upgraded|downgraded|renamed|rebranded|transferred|"
    "relocated|reassigned|raised|lowered|bumped|increased|reduced|cut|dropped|extended|"
    "shortened|went (?:up|down)|shifted|converted|repointed|updated|expanded|promoted|"
    "repriced|reduced|grew|fell"
)
#: Phrases by which a statement says the world changed. Words alone mislead ("takes longer",
#: "the changed paths", "after changing the URL"), so a verb of change counts only with the
#: direction it changed in ("moved to", "raised from"), "longer" only after "no", and a
#: handover only in the past, with whom it passed from or to ("took over … from", "has taken
#: over as", "handed … over to"; not "took over an hour", nor the habitual "takes over from
#: the primary when it fails").
CHANGE_PHRASES = re.compile(
    r"\b(?:no longer|not \w+ (?:any ?more)|anymore|from now on|going forward|henceforth|"
    r"nowadays|these days|now|instead|since|as of|effective|starting (?:on|in|from|with|"
    r"next|this|today|\d)|(?:" + _VERB_OF_CHANGE + r")(?: \S+){0,5}? (?:to|from|into|onto|off|"
    r"over)|(?:replaced|superseded)(?: \S+){0,4}? (?:by|with)|replac(?:es|ing)|superseding|"
    r"(?:took|taken) over (?!an? |\d|(?:half|most|all|part) )(?:\S+ ){0,5}?(?:from|as)|"
    r"handed(?: \S+){0,4}? (?:over|off) to|"
    r"renamed|resumed|rescheduled|postponed|retired|"
    r"deprecated|withdrawn|discontinued|decommissioned|sunset|reimaged|reverted|"
    r"rolled back)\b"
)  # matched against lowercased text: several times faster than re.IGNORECASE


@per_text(8192)  # one pair asks for it from several rules
def change_phrases(text: str) -> frozenset[str]:
    """The change phrases of :data:`CHANGE_PHRASES` in ``text``, lowercased."""
    return frozenset(m.group(0) for m in CHANGE_PHRASES.finditer(text.lower()))


@dataclass(frozen=True, slots=True)
class Lexicon:
    """Antonyms (each stem to its opposites) and change verbs, as stems."""

    antonyms: dict[str, frozenset[str]]
    change_verbs: frozenset[str]

    def opposites(self, word: str) -> frozenset[str]:
        """The stems WordNet lists as antonyms of ``word``'s stem."""
        return self.antonyms.get(word, frozenset())


@functools.cache
def lexicon() -> Lexicon:
    """The packaged lexicon, read once per process."""
    text = resources.files(__package__).joinpath("wordnet_lexicon.txt").read_text("utf-8")
    antonyms: dict[str, set[str]] = {}
    change: set[str] = set()
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        kind, *words = line.split("\t")
        if kind == "antonym" and len(words) == 2:
            left, right = stem(words[0]), stem(words[1])
            if left != right:
                antonyms.setdefault(left, set()).add(right)
                antonyms.setdefault(right, set()).add(left)
        elif kind == "change" and words:
            change.add(stem(words[0]))
    return Lexicon({w: frozenset(o) for w, o in antonyms.items()}, frozenset(change))
