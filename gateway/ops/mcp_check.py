"""``nightowl doctor``'s MCP lines: each configured server is started (a stdio one as a
child, ended after the check), and listed with its tools (docs/design.md#mcp-tools)."""

from __future__ import annotations

from gateway.build import build_mcp_servers
from gateway.config.schema import Config
from gateway.ops.reachability import Check


async def check_mcp_servers(config: Config, timeout: float) -> list[Check]:
    """One line per enabled server: up with its tools' names, or why not."""
    servers = build_mcp_servers(config)
    if servers is None:
        return []
    await servers.start(ready_within=timeout)
    try:
        checks = []
        for name, connection in servers.connections.items():
            spec = connection.spec
            where = f"{spec.transport} {spec.where}"
            if connection.state != "up":
                why = connection.last_error or f"no answer within {timeout:g} s"
                hint = "check the command (or URL) and that it speaks MCP"
                checks.append(Check(f"mcp {name}", False, f"{where}: {why}", hint))
                continue
            tools = [tool.name for tool in connection.tools(vision=False)]
            listed = ", ".join(tools) if tools else "no tools"
            checks.append(Check(f"mcp {name}", True, f"{where}: {len(tools)} tool(s): {listed}"))
        return checks
    finally:
        await servers.stop()
