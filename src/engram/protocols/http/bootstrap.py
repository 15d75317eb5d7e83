"""First serve: an empty agent registry gets a trusted admin agent, announced once."""

from __future__ import annotations

import sys
from collections.abc import Callable

from engram.kernel import Kernel

Announce = Callable[[str], object]


def to_stdout(text: str) -> None:
    """Print and flush at once (stdout is block-buffered when it is a pipe)."""
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


def base_url(host: str, port: int) -> str:
    """The URL a local client reaches the server at (a wildcard bind becomes loopback)."""
    if host in ("", "0.0.0.0"):  # noqa: S104 - recognising the wildcard, not binding it
        host = "127.0.0.1"
    elif host == "::":
        host = "::1"
    if ":" in host:
        host = f"[{host}]"
    return f"http://{host}:{port}"


def first_agent_text(name: str, token: str, base: str) -> str:
    """What the operator is told once: the token and a copy-paste example."""
    auth = '-H "Authorization: Bearer $ENGRAM_TOKEN" -H "Content-Type: application/json"'
    return "\n".join(
        [
            "",
            f"engram: no agents yet, so an admin agent {name!r} (trusted) was created.",
            "Its token is shown only this once; keep it secret:",
            "",
            f"    {token}",
            "",
            "Try it (copy and paste):",
            "",
            f"export ENGRAM_TOKEN={token}",
            f"curl -s -X POST {base}/v1/memories {auth} \\",
            """  -d '{"type": "belief", "content": "The ledger service runs on PostgreSQL."}'""",
            f"curl -s -X POST {base}/v1/search {auth} \\",
            """  -d '{"query": "which database does the ledger service use"}'""",
            "",
        ]
    )


async def announce_first_agent(kernel: Kernel, announce: Announce) -> bool:
    """Create the first agent if there is none and announce its token; True if it did."""
    created = await kernel.agents.ensure_first_agent()
    if created is None:
        return False
    agent, token = created
    settings = kernel.settings
    announce(first_agent_text(agent.name, token, base_url(settings.host, settings.port)))
    return True
