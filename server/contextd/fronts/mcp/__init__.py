"""The MCP server: tools and resources over the native API, on streamable HTTP (the
MCP port) or standard input and output (``contextd mcp --stdio``); docs/mcp.md."""
