"""Seeded generator of realistic agent-memory text (20-60 words), shared by the benchmarks."""

from __future__ import annotations

import random

PEOPLE = [
    "Dana",
    "Priya",
    "Marco",
    "Aiko",
    "Tomasz",
    "Lena",
    "Kwame",
    "Sofia",
    "Ravi",
    "Ines",
    "Jonas",
    "Mei",
    "Oluwaseun",
    "Hannah",
    "Diego",
    "Yusuf",
    "Clara",
    "Bjorn",
]
SERVICES = [
    "ledger service",
    "billing API",
    "search cluster",
    "auth gateway",
    "notification worker",
    "reporting pipeline",
    "checkout flow",
    "inventory sync",
    "feature flag service",
    "mobile backend",
    "data warehouse loader",
    "fraud scorer",
    "email relay",
    "image resizer",
    "session store",
    "audit exporter",
    "pricing engine",
    "geo lookup",
]
TECH = [
    "PostgreSQL 16",
    "Redis 7",
    "Kafka",
    "Elasticsearch",
    "ClickHouse",
    "Go 1.22",
    "Rust",
    "Python 3.12",
    "Node 20",
    "Kubernetes",
    "Nomad",
    "S3",
    "GCS",
    "RabbitMQ",
    "gRPC",
    "Envoy",
]
TEAMS = ["payments", "platform", "growth", "data", "security", "mobile", "search", "infra"]
REGIONS = ["eu-west-1", "us-east-2", "ap-southeast-1", "eu-central-1", "us-west-2"]
CHANNELS = ["#releases", "#incidents", "#payments-oncall", "#data-eng", "the weekly digest"]
CAUSES = [
    "a missing environment variable",
    "an expired TLS certificate",
    "a schema migration lock",
    "a bad feature flag default",
    "disk pressure on the primary",
    "a DNS change",
    "a dependency upgrade",
    "an exhausted connection pool",
    "clock skew between nodes",
]
REASONS = [
    "it halves the p95 latency",
    "the vendor contract ends in March",
    "operations asked for it",
    "it removes a single point of failure",
    "costs dropped by a third in the trial",
    "the old client library is unmaintained",
    "auditors require it",
    "it simplifies on-call",
]
THINGS = [
    "short status updates",
    "tabs over spaces",
    "written design docs",
    "morning standups",
    "pair reviews for migrations",
    "dark mode dashboards",
    "async decisions in threads",
]


def _sentence(rng: random.Random) -> str:
    person, person2 = rng.sample(PEOPLE, 2)
    service, service2 = rng.sample(SERVICES, 2)
    tech, tech2 = rng.sample(TECH, 2)
    day = f"2026-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"
    version = f"v{rng.randint(1, 9)}.{rng.randint(0, 30)}.{rng.randint(0, 9)}"
    templates = [
        (
            f"The {service} runs on {tech} in {rng.choice(REGIONS)} and is owned by the "
            f"{rng.choice(TEAMS)} team."
        ),
        (
            f"On {day} the deploy of the {service} {version} failed because of "
            f"{rng.choice(CAUSES)}; {person} rolled it back after {rng.randint(3, 95)} minutes."
        ),
        f"We decided to move the {service} from {tech} to {tech2} because {rng.choice(REASONS)}.",
        (
            f"{person} prefers {rng.choice(THINGS)} and asked to be pinged in "
            f"{rng.choice(CHANNELS)} when the {service} changes."
        ),
        (
            f"The {service} keeps {rng.randint(2, 90)} days of history and serves about "
            f"{rng.randint(1, 900)} requests per second at peak."
        ),
        (
            f"{person} and {person2} agreed that the {service} should call the {service2} through "
            f"{tech} with a timeout of {rng.randint(50, 3000)} milliseconds."
        ),
        (
            f"Rotating the signing key of the {service} takes {rng.randint(2, 8)} steps and about "
            f"{rng.randint(5, 60)} minutes, according to {person}."
        ),
        (
            f"The incident on {day} showed that the {service} retries too aggressively when the "
            f"{service2} is slow."
        ),
        (
            f"Budget review: the {service} costs {rng.randint(200, 9000)} dollars a month, mostly "
            f"for {tech} capacity."
        ),
    ]
    return rng.choice(templates)


def agent_text(rng: random.Random) -> str:
    """One memory text of 20 to 60 words made of 2-4 sentences."""
    while True:
        text = " ".join(_sentence(rng) for _ in range(rng.randint(2, 4)))
        words = len(text.split())
        if 20 <= words <= 60:
            return text


def texts(count: int, seed: int) -> list[str]:
    """``count`` distinct texts from one seed."""
    rng = random.Random(seed)
    seen: set[str] = set()
    out: list[str] = []
    while len(out) < count:
        text = agent_text(rng)
        if text not in seen:
            seen.add(text)
            out.append(text)
    return out
