"""engram: a governed memory kernel for AI agents on PostgreSQL + pgvector.

The public Python surface is :func:`open_kernel` and the :class:`Kernel` it yields.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"
__all__ = ["Kernel", "__version__", "open_kernel"]

if TYPE_CHECKING:
    from engram.kernel import Kernel, open_kernel


def __getattr__(name: str) -> Any:
    # Imported lazily: embedding worker processes import engram.infra without the kernel.
    if name in {"Kernel", "open_kernel"}:
        from engram import kernel  # noqa: PLC0415

        return getattr(kernel, name)
    raise AttributeError(f"module 'engram' has no attribute {name!r}")
