"""Where the repository's files are, for tests that read or build them."""

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
