"""The trained pair classifier: gradient-boosted trees read from a packaged JSON file.

``conflict_model.json`` is written by ``tools/train_conflict_model.py`` from the dev half of
the labelled set only (ADR-010). It holds the feature names it was trained with, the trees
(per boosting stage, one regression tree per class) and the per-class offset, so scoring
needs no machine-learning library: the trees are laid out as padded arrays and all of them are
walked at once, level by level, for every pair of a write (one NumPy pass, not a Python loop
over a few hundred trees per pair).

The classes are the questions the rules above it cannot answer from metadata: ``conflict``
(the two statements cannot both be true of one subject), ``refinement`` (the newer adds
compatible detail) and ``none``.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from typing import Any

import numpy as np
from numpy.typing import NDArray

from engram.errors import ConfigurationError
from engram.memory.conflict.features import FEATURES

MODEL_FILE = "conflict_model.json"


@dataclass(frozen=True, slots=True)
class _Forest:
    """Every tree of the model as padded parallel arrays, one row per tree (scikit-learn's
    node layout: ``left == -1`` marks a leaf). Trees are ordered stage by stage, class by class.
    """

    feature: NDArray[np.intp]
    threshold: NDArray[np.float64]
    left: NDArray[np.intp]
    right: NDArray[np.intp]
    value: NDArray[np.float64]
    depth: int

    @classmethod
    def from_trees(cls, trees: Sequence[dict[str, Any]]) -> _Forest:
        width = max(len(t["left"]) for t in trees)

        def padded(key: str, fill: float, dtype: type) -> Any:
            rows = [list(t[key]) + [fill] * (width - len(t[key])) for t in trees]
            return np.asarray(rows, dtype=dtype)

        forest = cls(
            feature=padded("feature", 0, np.intp),
            threshold=padded("threshold", 0.0, np.float64),
            left=padded("left", -1, np.intp),
            right=padded("right", -1, np.intp),
            value=padded("value", 0.0, np.float64),
            depth=max(_depth(t["left"], t["right"]) for t in trees),
        )
        for name in ("feature", "threshold", "left", "right", "value"):
            getattr(forest, name).flags.writeable = False
        return forest

    def leaves(self, rows: NDArray[np.float64]) -> NDArray[np.float64]:
        """The leaf value of every tree for every row: shape (rows, trees)."""
        count, width = self.left.shape
        # flat node numbers (tree * width + node) index the raveled arrays with one take each
        base = np.arange(count, dtype=np.intp) * width
        flat = np.broadcast_to(base, (rows.shape[0], count)).copy()
        row_start = (np.arange(rows.shape[0], dtype=np.intp) * rows.shape[1])[:, None]
        feature, threshold = self.feature.ravel(), self.threshold.ravel()
        left, right = self.left.ravel(), self.right.ravel()
        x = rows.ravel()
        for _ in range(self.depth):
            goes_left = x.take(feature.take(flat) + row_start) <= threshold.take(flat)
            child = np.where(goes_left, left.take(flat), right.take(flat))
            flat = np.where(child == -1, flat, base + child)  # a leaf stays where it is
        return self.value.ravel().take(flat)


def _depth(left: Sequence[int], right: Sequence[int]) -> int:
    """Edges on the longest root-to-leaf path."""
    deepest, stack = 0, [(0, 0)]
    while stack:
        node, level = stack.pop()
        if left[node] == -1:
            deepest = max(deepest, level)
        else:
            stack += [(left[node], level + 1), (right[node], level + 1)]
    return deepest


@dataclass(frozen=True, slots=True)
class PairModel:
    """A multi-class boosted-tree model over :data:`~engram.memory.conflict.features.FEATURES`."""

    version: str
    classes: tuple[str, ...]
    offset: tuple[float, ...]
    learning_rate: float
    forest: _Forest

    def probabilities(self, x: Sequence[float]) -> dict[str, float]:
        """The softmax over classes of the summed tree outputs for one feature vector."""
        return self.probabilities_of([x])[0]

    def probabilities_of(self, rows: Sequence[Sequence[float]]) -> list[dict[str, float]]:
        """:meth:`probabilities` of several feature vectors in one pass over the trees."""
        if not rows:
            return []
        # scikit-learn's trees read features as float32: a value between a float32 and its
        # float64 neighbour would otherwise take the other branch than in training
        x = np.asarray(rows, dtype=np.float32).astype(np.float64)
        leaves = self.forest.leaves(x).reshape(len(rows), -1, len(self.classes))
        raw = np.asarray(self.offset) + self.learning_rate * leaves.sum(axis=1)
        exp = np.exp(raw - raw.max(axis=1, keepdims=True))
        shares = exp / exp.sum(axis=1, keepdims=True)
        return [
            {label: float(p) for label, p in zip(self.classes, row, strict=True)} for row in shares
        ]

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> PairModel:
        """Build from the JSON layout; refuses a file trained on other features."""
        if tuple(data["features"]) != FEATURES:
            raise ConfigurationError(
                f"{MODEL_FILE} was trained on other features; run tools/train_conflict_model.py"
            )
        classes = tuple(data["classes"])
        if any(len(stage) != len(classes) for stage in data["stages"]):
            raise ConfigurationError(f"{MODEL_FILE}: every stage needs one tree per class")
        return cls(
            version=str(data["version"]),
            classes=classes,
            offset=tuple(float(v) for v in data["offset"]),
            learning_rate=float(data["learning_rate"]),
            forest=_Forest.from_trees([tree for stage in data["stages"] for tree in stage]),
        )


@functools.cache
def packaged_model() -> PairModel:
    """The model shipped with the package, read once per process."""
    text = resources.files(__package__).joinpath(MODEL_FILE).read_text("utf-8")
    return PairModel.from_dict(json.loads(text))
