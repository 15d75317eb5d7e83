"""The words of the simulated agent's life: subjects, values, the slot type, chatter.

A slot is one kind of fact about one kind of subject ("the host of a service", "the deploy
day of a team"); the slots themselves are in :mod:`engram.protocols.simulator.slots`. Each
carries statement, query and update templates. The last
:data:`HELD_OUT_STATEMENTS` statement templates, the last :data:`HELD_OUT_QUERIES` query
templates and the last :data:`HELD_OUT_UPDATES` update templates of every slot, and the last
:data:`HELD_OUT_CHATTER` chatter lines, are used by ``eval`` worlds only, so that an advisor
is judged on wording it was never trained on.

Placeholders: ``{S}`` the subject with a capital first letter, ``{s}`` the subject as is,
``{n}`` its bare name (no article), ``{v}`` the value and ``{o}`` the value it replaces.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass

from engram.memory.types import MemoryType

HELD_OUT_STATEMENTS = 2
HELD_OUT_QUERIES = 1
HELD_OUT_UPDATES = 1
HELD_OUT_CHATTER = 6


@dataclass(frozen=True, slots=True)
class Slot:
    """One kind of fact: its subject kind, memory type, value kind and templates."""

    name: str
    subject_kind: str  # "service" | "team" | "person" | "customer"
    memory_type: MemoryType
    value_kind: str  # a generator of world.py: "host", "port", "region", ...
    statements: tuple[str, ...]
    queries: tuple[str, ...]
    updates: tuple[str, ...]
    rationales: tuple[str, ...] = ()  # decisions: reasons, one per fact
    topic: str = ""  # preferences: what the preference is about


SUBJECTS: dict[str, tuple[str, ...]] = {
    "service": (
        "the billing API", "the search indexer", "the auth gateway", "the ledger service",
        "the notification worker", "the checkout frontend", "the reporting pipeline",
        "the image resizer", "the feature-flag service", "the export scheduler",
        "the webhook relay", "the session cache", "the pricing engine",
        "the audit trail service", "the metrics collector", "the email dispatcher",
    ),
    "team": (
        "the payments team", "the platform team", "the growth team", "the data team",
        "the mobile team", "the infra team", "the support tooling team", "the security team",
    ),
    "person": (
        "Priya", "Marcus", "Elena", "Tomasz", "Aiko", "Jonas", "Farah", "Diego", "Mei", "Oskar",
    ),
    "customer": (
        "Halden Freight", "Orchid Labs", "Bramblewood Clinics", "Quarry and Vane",
        "Tessellate Games", "Miravel Foods", "Copperline Energy", "Nimbus Dental",
        "Larkspur Legal", "Ostrander Mills",
    ),
}  # fmt: skip

# Value vocabularies (world.py combines them with numbers drawn from the world's generator).
FIRST_NAMES = (
    "Nadia", "Kofi", "Ingrid", "Rafael", "Yusuf", "Hana", "Bjorn", "Lucia", "Tariq", "Sofia",
    "Emeka", "Greta", "Ravi", "Ines", "Mateo", "Leila",
)  # fmt: skip
LAST_NAMES = (
    "Okafor", "Lindqvist", "Moreau", "Haddad", "Kowalski", "Nakamura", "Ferreira", "Brennan",
    "Castillo", "Varga", "Osei", "Petrov", "Sandoval", "Whitfield",
)  # fmt: skip
HOST_ROLES = ("db", "app", "cache", "queue", "api", "worker", "edge", "batch")
HOST_ZONES = ("eu1", "eu2", "us1", "us3", "ap2", "sa1")
REGIONS = (
    "eu-west-1", "eu-central-2", "us-east-2", "us-west-1", "ap-south-1", "ap-northeast-3",
    "sa-east-1", "ca-central-1", "me-south-1", "af-south-1", "eu-north-1", "ap-southeast-2",
)  # fmt: skip
DATABASES = (
    "PostgreSQL 16", "CockroachDB", "MySQL 8", "ScyllaDB", "DynamoDB", "MariaDB 11",
    "ClickHouse", "FoundationDB", "Cassandra", "TimescaleDB",
)  # fmt: skip
EDITORS = ("Neovim", "Helix", "Emacs", "VS Code", "IntelliJ IDEA", "Sublime Text", "Kakoune")
WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday")
MONTHS = (
    "January", "February", "March", "April", "May", "June", "July", "August", "September",
    "October", "November", "December",
)  # fmt: skip
PLAN_TIERS = ("Starter", "Growth", "Scale", "Business", "Enterprise", "Premier")
_CODE_CHARS = "abcdefghjkmnpqrstuvwxyz23456789"


def _code(rng: random.Random, length: int) -> str:
    return "".join(rng.choice(_CODE_CHARS) for _ in range(length))


# How a value of each kind is drawn: from the world's generator and the subject's slug.
VALUE_MAKERS: dict[str, Callable[[random.Random, str], str]] = {
    "host": lambda rng, _: (
        f"{rng.choice(HOST_ROLES)}-{rng.randint(2, 99)}.{rng.choice(HOST_ZONES)}.internal"
    ),
    "port": lambda rng, _: str(rng.randint(1025, 65000)),
    "region": lambda rng, _: rng.choice(REGIONS),
    "duration": lambda rng, _: f"{rng.randint(12, 480) * 25} ms",
    "person": lambda rng, _: f"{rng.choice(FIRST_NAMES)} {rng.choice(LAST_NAMES)}",
    "runbook": lambda rng, slug: (
        f"https://runbooks.corp.example/{slug}/rb-{rng.randint(1000, 9999)}"
    ),
    "dashboard": lambda rng, slug: f"https://grafana.corp.example/d/{_code(rng, 6)}/{slug}",
    "database": lambda rng, _: rng.choice(DATABASES),
    "version": lambda rng, _: f"v{rng.randint(1, 9)}.{rng.randint(0, 30)}.{rng.randint(0, 20)}",
    "weekday": lambda rng, _: rng.choice(WEEKDAYS),
    "clock": lambda rng, _: f"{rng.randint(7, 18):02d}:{rng.choice((0, 15, 30, 45)):02d}",
    "date": lambda rng, _: f"{rng.randint(1, 28)} {rng.choice(MONTHS)}",
    "editor": lambda rng, _: rng.choice(EDITORS),
    "lines": lambda rng, _: f"{rng.randint(15, 90) * 10} lines",
    "plan": lambda rng, _: f"{rng.choice(PLAN_TIERS)} {rng.randint(2, 99) * 10}",
}

# Transient agent talk, stored as episodes. ``{s}`` is filled with a service.
CHATTER: tuple[str, ...] = (
    "Looking into the flaky integration test on the main branch now.",
    "Back from lunch, picking the code review up where I left it.",
    "Grabbing a coffee before the next round of pull requests.",
    "Restarting my local environment because the containers got stuck again.",
    "Still waiting on CI, the queue looks longer than usual.",
    "Skimming the logs of {s} to get a feel for the noise level.",
    "Pairing with a teammate on a tricky merge conflict for a while.",
    "Closing a few stale browser tabs and clearing my notifications.",
    "Re-running the linter after fixing a handful of whitespace warnings.",
    "Taking a short break, the retro ran longer than planned.",
    "Reading through an old design doc to refresh my memory.",
    "Half way through reviewing the change set for {s}.",
    "The office wifi dropped twice in the last hour, working around it.",
    "Trying a fresh build after clearing the dependency cache.",
    "Jotting down a couple of questions to raise at the next sync.",
    "Poking at {s} locally to see whether the warning still shows up.",
    "My terminal froze for a minute, everything seems fine again.",
    "Answering a few messages in the team chat before getting back to work.",
    "Spent ten minutes hunting a typo in a config key and found it.",
    "The build server feels sluggish, nothing blocking so far.",
)
