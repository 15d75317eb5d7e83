"""CLS consolidation: fast-path records distilled into slow-path knowledge (specification §3.5,
§5.4; ADR-018). :class:`ConsolidationEngine` is the entry point."""

from engram.memory.consolidation.engine import ConsolidationEngine, ConsolidationSettings
from engram.memory.consolidation.model import (
    BatchItem,
    BatchReport,
    ConsolidationAction,
    ConsolidationCandidate,
    ConsolidationReport,
    RollbackReport,
    SkipReason,
    SweepReport,
)
from engram.memory.consolidation.summarize import (
    CheckedSummarizer,
    ExtractiveSummarizer,
    Summarizer,
    TextGenerator,
)
from engram.memory.consolidation.undo import CONSOLIDATOR
from engram.memory.types import ConsolidationTrigger

__all__ = [
    "CONSOLIDATOR",
    "BatchItem",
    "BatchReport",
    "CheckedSummarizer",
    "ConsolidationAction",
    "ConsolidationCandidate",
    "ConsolidationEngine",
    "ConsolidationReport",
    "ConsolidationSettings",
    "ConsolidationTrigger",
    "ExtractiveSummarizer",
    "RollbackReport",
    "SkipReason",
    "Summarizer",
    "SweepReport",
    "TextGenerator",
]
