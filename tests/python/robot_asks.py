"""A robot that speaks MCP and asks before it works, for tests/it/robots.rs.

An MCPServer (the Python SDK's FastMCP) over streamable HTTP on loopback. Its `execute_task`
tool asks which room with `ctx.elicit` (an elicitation the exchange relays to the requestor as
needs_input) and answers with the room it was told. It prints its URL on the first line, then
serves until it is killed.
"""

import socket
import sys

import anyio
from pydantic import BaseModel, Field

from mcp.server.mcpserver import Context, MCPServer


class Room(BaseModel):
    room: str = Field(description="which room")
    passes: int = Field(description="how many passes")


server = MCPServer("asking-robot")


@server.tool()
async def execute_task(
    intent: str,
    ctx: Context,
    ref: str = "",
    context: list | None = None,
    requires: list | None = None,
    link: str | None = None,
) -> str:
    answer = await ctx.elicit(f"Where and how often should I {intent}?", schema=Room)
    if answer.action == "accept":
        return f"did {intent} in the {answer.data.room}, {answer.data.passes} passes"
    return f"did not {intent}: {answer.action}"


def main() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    print(f"http://127.0.0.1:{port}/mcp", flush=True)
    anyio.run(lambda: server.run_streamable_http_async(host="127.0.0.1", port=port))


if __name__ == "__main__":
    sys.exit(main())
