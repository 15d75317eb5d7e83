"""Replay policies: the rules audit replay tries instead of the current ones (a TOML file of
Layer 1's declarative types, per-tier rate limits and the advisor's thresholds; ADR-014)."""

from __future__ import annotations

import json
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engram.errors import ValidationFailed
from engram.memory.conflict.detection import ConflictResolver
from engram.memory.gate.advisor import (
    GateAdvisor,
    HeuristicAdvisor,
    HeuristicPolicy,
)
from engram.memory.gate.checks import DECLARATIVE_TYPES
from engram.memory.gate.learned import RLAdvisor
from engram.memory.rl.policy import AdvisorPolicy
from engram.memory.types import (
    MemoryType,
    TrustLevel,
)

ADVISORS = ("heuristic", "rl")
#: The largest policy file read (a policy holds a few dozen lines).
MAX_POLICY_BYTES = 1 << 20

_ADVISOR_FLOATS = (
    "near_duplicate",
    "update_candidate",
    "restatement",
    "plain_restatement",
    "related",
)
_ADVISOR_COUNTS = ("related_for_consolidation", "repetitions_for_consolidation")
_SECTIONS = {"layer1", "rate_limit", "advisor"}


@dataclass(frozen=True, slots=True)
class ReplayPolicy:
    """The knobs a replay may turn; the defaults are the Gate's own rules.

    ``writes_per_minute`` gives a tier's rate to callers without a rate of their own, as if
    each such agent had been registered with it (burst: a fifth of a minute's writes, at
    least one).
    """

    advisor: HeuristicPolicy = field(default_factory=HeuristicPolicy)
    declarative_types: frozenset[MemoryType] = DECLARATIVE_TYPES
    writes_per_minute: Mapping[TrustLevel, float] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """The policy in the file format's shape (every knob, defaults included)."""
        return {
            "layer1": {"declarative_types": sorted(t.value for t in self.declarative_types)},
            "rate_limit": {tier.value: rate for tier, rate in self.writes_per_minute.items()},
            "advisor": {
                **{name: getattr(self.advisor, name) for name in _ADVISOR_FLOATS},
                **{name: getattr(self.advisor, name) for name in _ADVISOR_COUNTS},
                "trust_factor": {t.value: f for t, f in self.advisor.trust_factor.items()},
            },
        }


def _section(data: Mapping[str, Any], name: str, problems: list[str]) -> Mapping[str, Any]:
    value = data.get(name, {})
    if not isinstance(value, Mapping):
        problems.append(f"[{name}] must be a table")
        return {}
    return value


def _fraction(value: object, where: str, problems: list[str]) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 1:
        problems.append(f"{where}: a number between 0 and 1")
        return None
    return float(value)


def _tiers(
    table: object, where: str, problems: list[str], *, fraction: bool
) -> dict[TrustLevel, float]:
    if not isinstance(table, Mapping):
        problems.append(f"{where} must be a table of trust levels")
        return {}
    out: dict[TrustLevel, float] = {}
    for key, value in table.items():
        try:
            tier = TrustLevel(key)
        except ValueError:
            problems.append(f"{where}.{key}: not a trust level")
            continue
        if fraction:
            number = _fraction(value, f"{where}.{key}", problems)
        elif isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
            problems.append(f"{where}.{key}: writes per minute, a number >= 0")
            number = None
        else:
            number = float(value)
        if number is not None:
            out[tier] = number
    return out


def _advisor_policy(section: Mapping[str, Any], problems: list[str]) -> HeuristicPolicy:
    known = {*_ADVISOR_FLOATS, *_ADVISOR_COUNTS, "trust_factor"}
    problems.extend(f"[advisor] {key}: unknown knob" for key in section if key not in known)
    values: dict[str, Any] = {}
    for name in _ADVISOR_FLOATS:
        if name in section:
            number = _fraction(section[name], f"advisor.{name}", problems)
            if number is not None:
                values[name] = number
    for name in _ADVISOR_COUNTS:
        if name in section:
            count = section[name]
            if isinstance(count, bool) or not isinstance(count, int) or count < 1:
                problems.append(f"advisor.{name}: a whole number >= 1")
            else:
                values[name] = count
    if "trust_factor" in section:
        factors = _tiers(section["trust_factor"], "advisor.trust_factor", problems, fraction=True)
        values["trust_factor"] = {**HeuristicPolicy().trust_factor, **factors}
    return HeuristicPolicy(**values)


def policy_from_mapping(data: Mapping[str, Any]) -> ReplayPolicy:
    """A policy from its parsed file; unknown or invalid knobs are :class:`ValidationFailed`."""
    problems = [f"[{key}]: unknown section" for key in data if key not in _SECTIONS]
    layer1 = _section(data, "layer1", problems)
    problems.extend(f"[layer1] {k}: unknown knob" for k in layer1 if k != "declarative_types")
    declarative = DECLARATIVE_TYPES
    if "declarative_types" in layer1:
        names = layer1["declarative_types"]
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
            problems.append("layer1.declarative_types: a list of memory types")
        else:
            try:
                declarative = frozenset(MemoryType(n) for n in names)
            except ValueError as exc:
                problems.append(f"layer1.declarative_types: {exc}")
    rates = _tiers(_section(data, "rate_limit", problems), "rate_limit", problems, fraction=False)
    advisor = _advisor_policy(_section(data, "advisor", problems), problems)
    if problems:
        raise ValidationFailed(errors=problems)
    return ReplayPolicy(advisor=advisor, declarative_types=declarative, writes_per_minute=rates)


def load_policy(path: Path) -> ReplayPolicy:
    """Read a policy file: TOML, or JSON when the name ends in ``.json``; one larger than
    :data:`MAX_POLICY_BYTES` is refused after reading no more than that."""
    try:
        with path.open("rb") as file:
            raw = file.read(MAX_POLICY_BYTES + 1)
        if len(raw) > MAX_POLICY_BYTES:
            raise ValidationFailed(errors=[f"policy file {path}: larger than 1 MiB"])
        text = raw.decode("utf-8")
        data = json.loads(text) if path.suffix == ".json" else tomllib.loads(text)
    except (OSError, ValueError) as exc:
        raise ValidationFailed(errors=[f"policy file {path}: {exc}"]) from exc
    except RecursionError:
        raise ValidationFailed(errors=[f"policy file {path}: nested too deeply to read"]) from None
    if not isinstance(data, dict):
        raise ValidationFailed(errors=[f"policy file {path}: not a table of sections"])
    return policy_from_mapping(data)


def make_advisor(
    name: str,
    resolver: ConflictResolver,
    policy: ReplayPolicy,
    model: AdvisorPolicy | None = None,
) -> GateAdvisor:
    """The advisor called ``name`` (one of :data:`ADVISORS`) with the policy's thresholds;
    ``rl`` scores with ``model`` (without one it answers as the heuristic, marked fallback)."""
    heuristic = HeuristicAdvisor(resolver, policy.advisor)
    if name == "heuristic":
        return heuristic
    if name == "rl":
        return RLAdvisor(heuristic, model)
    raise ValidationFailed(errors=[f"advisor {name!r}: one of {', '.join(ADVISORS)}"])
