"""Arrays learned offline and shipped inside this package (the query adapter's map, the type
prior's weights): each file is a NumPy ``.npz`` read once by the module that uses it, with
pickles refused."""

from __future__ import annotations

from importlib import resources
from io import BytesIO
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # NumPy is loaded by the first search, not by every import of search
    import numpy.typing as npt


def read_arrays(filename: str) -> dict[str, npt.NDArray[Any]]:
    """Every array of the package's ``filename``, by name."""
    import numpy as np  # noqa: PLC0415 - see the imports

    raw = resources.files(__package__).joinpath(filename).read_bytes()
    with np.load(BytesIO(raw), allow_pickle=False) as stored:
        return {name: stored[name] for name in stored.files}
