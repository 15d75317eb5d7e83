"""The MCP server: engram's memory tools for one authenticated agent, over stdio or HTTP.

- :mod:`engram.protocols.mcp.schema`: the tools' argument models, descriptions, definitions.
- :mod:`engram.protocols.mcp.outputs`: the shapes of their results (the output schemas).
- :mod:`engram.protocols.mcp.results`: results, errors and how engram errors map to them.
- :mod:`engram.protocols.mcp.tools`: their handlers.
- :mod:`engram.protocols.mcp.server`: the SDK server object around them.
- :mod:`engram.protocols.mcp.stdio`: `engram mcp` (one agent, ``ENGRAM_AGENT_TOKEN``).
- :mod:`engram.protocols.mcp.http`: ``/mcp`` on the HTTP server (a bearer token per request).
"""
