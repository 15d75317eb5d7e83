"""``engram agents``: register agents, list them, revoke and rotate their tokens."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from engram.admin_kernel import AdminKernel
from engram.agents.registry import Agent
from engram.memory.types import AccessLevel, MemoryType, TrustLevel
from engram.protocols.cli.output import print_json, print_table, when, with_admin

app = typer.Typer(help="Agents and their tokens.", no_args_is_help=True)

JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON (stdout holds only data).")]
SHOWN_ONCE = "the token is shown only this once: store it now (only its hash is kept)"


def _types(value: str | None) -> list[MemoryType] | None:
    if value is None:
        return None
    try:
        return [MemoryType(name.strip()) for name in value.split(",") if name.strip()]
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--types") from exc


def _row(agent: Agent) -> list[Any]:
    return [
        agent.name,
        agent.trust_level.value,
        "yes" if agent.admin else "",
        "all"
        if agent.allowed_types == frozenset(MemoryType)
        else ",".join(sorted(t.value for t in agent.allowed_types)),
        "" if agent.writes_per_minute is None else f"{agent.writes_per_minute:g}",
        agent.token_prefix + "…",
        when(agent.created_at),
        "revoked " + when(agent.revoked_at) if agent.revoked_at else "active",
        when(agent.last_seen_at),
    ]


def _print_token(agent: Agent, token: str, *, as_json: bool, verb: str) -> None:
    if as_json:
        print_json({"agent": agent.to_json(), "token": token, "token_shown_once": True})
    else:
        typer.echo(f"agent {agent.name} {verb} ({agent.trust_level.value})")
        typer.echo(token)
    typer.echo(f"engram: {SHOWN_ONCE}", err=True)


@app.command("add")
def add(  # noqa: PLR0917 - typer passes every option by keyword
    name: Annotated[str, typer.Argument(help="Agent name (letters, digits, '.', '_', '-').")],
    trust: Annotated[TrustLevel, typer.Option(help="Trust tier.")],
    types: Annotated[
        str | None, typer.Option(help="Comma-separated memory types it may write (narrower).")
    ] = None,
    admin: Annotated[bool, typer.Option("--admin", help="May use the admin endpoints.")] = False,
    writes_per_minute: Annotated[
        float | None, typer.Option(help="Its own rate limit (instead of the tier's).")
    ] = None,
    max_write_level: Annotated[
        AccessLevel | None, typer.Option(help="Highest access level it may write.")
    ] = None,
    max_read_level: Annotated[
        AccessLevel | None, typer.Option(help="Highest access level it may read.")
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Register an agent and print its token (once)."""
    chosen = _types(types)

    async def work(kernel: AdminKernel) -> tuple[Agent, str]:
        return await kernel.agents.add(
            name,
            trust,
            types=chosen,
            admin=admin,
            max_write_level=max_write_level,
            max_read_level=max_read_level,
            writes_per_minute=writes_per_minute,
        )

    agent, token = with_admin(work)
    _print_token(agent, token, as_json=as_json, verb="added")


@app.command("list")
def list_agents(
    active: Annotated[bool, typer.Option("--active", help="Leave revoked agents out.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object per line.")] = False,
) -> None:
    """List agents, oldest first (no tokens: only their first characters)."""

    async def work(kernel: AdminKernel) -> list[Agent]:
        return await kernel.agents.list_agents(include_revoked=not active)

    agents = with_admin(work)
    if as_json:
        for agent in agents:
            print_json(agent.to_json())
        return
    if not agents:
        typer.echo("no agents")
        return
    columns = ["name", "trust", "admin", "types", "writes/min", "token", "created", "state"]
    print_table(None, [*columns, "last seen"], [_row(agent) for agent in agents])


@app.command("revoke")
def revoke(
    name: Annotated[str, typer.Argument(help="Agent name.")],
    as_json: JsonOption = False,
) -> None:
    """Revoke an agent's token for good (its history stays)."""

    async def work(kernel: AdminKernel) -> Agent:
        return await kernel.agents.revoke(name)

    agent = with_admin(work)
    if as_json:
        print_json(agent.to_json())
    else:
        typer.echo(f"agent {agent.name} revoked")


@app.command("rotate")
def rotate(
    name: Annotated[str, typer.Argument(help="Agent name.")],
    as_json: JsonOption = False,
) -> None:
    """Give an active agent a new token (printed once); the old one stops working."""

    async def work(kernel: AdminKernel) -> tuple[Agent, str]:
        return await kernel.agents.rotate(name)

    agent, token = with_admin(work)
    _print_token(agent, token, as_json=as_json, verb="has a new token")


__all__ = ["app"]
