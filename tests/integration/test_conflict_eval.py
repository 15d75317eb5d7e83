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


async def test_the_held_out_half_does_not_regress(embedder: FastembedEmbedder) -> None:
    """On the test half accuracy stays above its recorded floor and nothing a person should
    decide is acted on."""
    result = await evaluate(embedder, HALVES / "test.jsonl")
    assert True is (result["accuracy"] >= TEST_ACCURACY_FLOOR), result["accuracy"]
    assert 0 == result["unresolvable_acted_on"], result["confusion_matrix"]
