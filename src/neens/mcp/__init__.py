"""The MCP server (the official `mcp` SDK): the model sweep flow as tools for a coding agent,
over stdio (`neens mcp`, `stdio.py`) and streamable HTTP (`/mcp` on the server, `http.py`)."""
