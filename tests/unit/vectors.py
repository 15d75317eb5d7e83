"""Random unit vectors for tests of what the search does to a question's embedding."""

from __future__ import annotations

import math
import random


def unit_vector(rng: random.Random, size: int) -> list[float]:
    """A vector of ``size`` Gaussian draws scaled to length 1."""
    vector = [rng.gauss(0.0, 1.0) for _ in range(size)]
    norm = math.sqrt(sum(x * x for x in vector))
    return [x / norm for x in vector]
