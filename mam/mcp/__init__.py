"""`mam mcp`: the MCP server (stdio or Streamable HTTP) over the same library calls as the CLI.

Imported only by `mam mcp`: the `mcp` SDK (pydantic, starlette, anyio) never loads for other commands.
"""
