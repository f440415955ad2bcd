"""The command line: ``contextd serve``, ``chat``, ``keys``, ``store`` and ``mcp``."""
