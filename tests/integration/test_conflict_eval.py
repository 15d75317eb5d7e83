"""The conflict detector on the labelled halves, with the real embedding model (issue 15)."""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from importlib import resources

from benchmarks.conflict_eval import HALVES, LABELS, evaluate, load_pairs
from engram.infra.fastembed_embedder import FastembedEmbedder
from engram.memory.types import MemoryType

#: Below what the held-out half measured when the detector was last changed (0.7182 with
#: conflict-gbdt@3 and with @4, issue 15's notes): a floor that catches a regression, not the
#: goal (0.85), which is not yet met.
TEST_ACCURACY_FLOOR = 0.70


def test_the_halves_cover_every_type_and_class_and_share_no_pair() -> None:
    """Both halves hold every type and label, and no pair (by id or by texts) is in both."""
    dev, test = load_pairs(HALVES / "dev.jsonl"), load_pairs(HALVES / "test.jsonl")
    labels = Counter(pair.label for pair in test)
    assert True is (len(test) >= 300 and len(dev) >= 600)
    assert set(MemoryType) == {pair.old.type for pair in test} == {p.old.type for p in dev}
    assert [] == [label for label in LABELS if labels[label] < 25]
    assert set() == {p.id for p in dev} & {p.id for p in test}
    texts = {(p.old.content, p.new.content) for p in dev}
    assert [] == [p.id for p in test if (p.old.content, p.new.content) in texts]


def test_the_packaged_model_was_trained_on_the_committed_dev_half() -> None:
    """The model file names the dev files' hashes, every dev file and only those: the test
    half cannot have trained it."""
    model = json.loads(
        resources.files("engram.memory.conflict").joinpath("conflict_model.json").read_text()
    )
    trained_on = {
        f"tests/data/conflict/{name}": hashlib.sha256((HALVES / name).read_bytes()).hexdigest()
        for name in sorted(path.name for path in HALVES.glob("dev*.jsonl"))
    }
    assert trained_on == model["training"]["files"]


#: What ``conflict-gbdt@8`` made of the unseen writers' pairs (tests/data/conflict/README.md):
#: floors against a regression on writers no model learned from, not goals.
UNSEEN_ACCURACY_FLOOR = 0.55
UNSEEN_SILENT_RETIREMENTS = 26


def test_the_unseen_writers_share_no_statement_with_the_other_sets() -> None:
    """No statement of the unseen writers' pairs is in the test half or any training file,
    and their ids are their own."""
    unseen = load_pairs(HALVES / "unseen_writers.jsonl")
    others = [
        p for path in (*HALVES.glob("dev*.jsonl"), HALVES / "test.jsonl") for p in load_pairs(path)
    ]
    known = {r.content for p in others for r in (p.old, p.new)}
    assert 800 == len(unseen) == len({p.id for p in unseen})
    assert [] == [p.id for p in unseen if {p.old.content, p.new.content} & known]
    assert set() == {p.id for p in unseen} & {p.id for p in others}


async def test_the_unseen_writers_do_not_regress(embedder: FastembedEmbedder) -> None:
    """On writers the packaged model never learned from: accuracy above its floor, no more
    true records ended or challenged than the model of record did, nothing a person should
    decide acted on beyond the one pair it acted on."""
    result = await evaluate(embedder, HALVES / "unseen_writers.jsonl")
    assert True is (result["accuracy"] >= UNSEEN_ACCURACY_FLOOR), result["accuracy"]
    assert True is (result["silent_retirements"] <= UNSEEN_SILENT_RETIREMENTS), result[
        "confusion_matrix"
    ]
    assert True is (result["unresolvable_acted_on"] <= 1), result["confusion_matrix"]


async def test_the_held_out_half_does_not_regress(embedder: FastembedEmbedder) -> None:
    """On the test half accuracy stays above its recorded floor and nothing a person should
    decide is acted on."""
    result = await evaluate(embedder, HALVES / "test.jsonl")
    assert True is (result["accuracy"] >= TEST_ACCURACY_FLOOR), result["accuracy"]
    assert 0 == result["unresolvable_acted_on"], result["confusion_matrix"]
