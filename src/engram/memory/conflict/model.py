"""The trained pair classifier: gradient-boosted trees read from a packaged JSON file.

``conflict_model.json`` is written by ``tools/train_conflict_model.py`` from the dev half of
the labelled set only (ADR-010). It holds the feature names it was trained with, the trees
(per boosting stage, one regression tree per class) and the per-class offset, so scoring
needs no machine-learning library: a few hundred comparisons in plain Python per pair.

The classes are the questions the rules above it cannot answer from metadata: ``conflict``
(the two statements cannot both be true of one subject), ``refinement`` (the newer adds
compatible detail) and ``none``.
"""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from typing import Any

from engram.errors import ConfigurationError
from engram.memory.conflict.features import FEATURES

MODEL_FILE = "conflict_model.json"


@dataclass(frozen=True, slots=True)
class _Tree:
    """Parallel arrays of one regression tree, as scikit-learn stores them."""

    feature: tuple[int, ...]
    threshold: tuple[float, ...]
    left: tuple[int, ...]
    right: tuple[int, ...]
    value: tuple[float, ...]

    def predict(self, x: Sequence[float]) -> float:
        node = 0
        while self.left[node] != -1:
            node = (
                self.left[node]
                if x[self.feature[node]] <= self.threshold[node]
                else self.right[node]
            )
        return self.value[node]


@dataclass(frozen=True, slots=True)
class PairModel:
    """A multi-class boosted-tree model over :data:`~engram.memory.conflict.features.FEATURES`."""

    version: str
    classes: tuple[str, ...]
    offset: tuple[float, ...]
    learning_rate: float
    stages: tuple[tuple[_Tree, ...], ...]  # one tree per class in each stage

    def probabilities(self, x: Sequence[float]) -> dict[str, float]:
        """The softmax over classes of the summed tree outputs."""
        raw = list(self.offset)
        for stage in self.stages:
            for k, tree in enumerate(stage):
                raw[k] += self.learning_rate * tree.predict(x)
        top = max(raw)
        exp = [math.exp(r - top) for r in raw]
        total = sum(exp)
        return {label: e / total for label, e in zip(self.classes, exp, strict=True)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> PairModel:
        """Build from the JSON layout; refuses a file trained on other features."""
        if tuple(data["features"]) != FEATURES:
            raise ConfigurationError(
                f"{MODEL_FILE} was trained on other features; run tools/train_conflict_model.py"
            )
        stages = tuple(
            tuple(
                _Tree(
                    tuple(t["feature"]),
                    tuple(t["threshold"]),
                    tuple(t["left"]),
                    tuple(t["right"]),
                    tuple(t["value"]),
                )
                for t in stage
            )
            for stage in data["stages"]
        )
        return cls(
            version=str(data["version"]),
            classes=tuple(data["classes"]),
            offset=tuple(float(v) for v in data["offset"]),
            learning_rate=float(data["learning_rate"]),
            stages=stages,
        )


@functools.cache
def packaged_model() -> PairModel:
    """The model shipped with the package, read once per process."""
    text = resources.files(__package__).joinpath(MODEL_FILE).read_text("utf-8")
    return PairModel.from_dict(json.loads(text))
