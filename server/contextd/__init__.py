"""contextd: assembles the context an LLM sees and reports what it did."""

__version__ = "0.1.0"
