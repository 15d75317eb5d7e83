"""The time limit of the tests that scan crafted texts of about 200 KB.

Those tests guard against work that grows faster than the text (a pattern that backtracks,
a rule that rescans from every position): at this size such a defect takes minutes. A scan
takes about 1.2 s on the 2-core CI machine when it is quiet, and up to about 2.8 s was seen
while other work shared the cores, so the limit leaves room for a loaded machine and still
fails a quadratic scan by a wide margin.
"""

from __future__ import annotations

#: Seconds a scan of one crafted text may take.
CRAFTED_SCAN_SECONDS = 6.0
