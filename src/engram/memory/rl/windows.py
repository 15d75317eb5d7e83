"""The time windows and sizes of the advisor's training data, in a module of their own so the
admin commands can show them as defaults without importing the learning code."""

from __future__ import annotations

from datetime import timedelta

#: How long after a decision its record's ratings count towards it.
HORIZON = timedelta(days=30)
#: Decisions older than this are not read for training.
WINDOW = timedelta(days=90)
#: Fewer decisions than this train nothing (the policy would learn noise).
MIN_DECISIONS = 100
