"""A host that calls the model itself: contextd builds the messages, the host sends them.

    python examples/python/build_openai.py [ADDRESS] > body.json

BuildMessages fits a system prompt, the conversation so far and the new user message
into a token budget, and with ``output_format="openai"`` returns them as a Chat
Completions request body. This program prints that body (JSON, on stdout) and what was
kept (on stderr); the host then posts it to the model, for example:

    curl https://api.openai.com/v1/chat/completions \\
        -H "Authorization: Bearer $OPENAI_API_KEY" -H "Content-Type: application/json" \\
        -d @body.json

ADDRESS defaults to $CONTEXTD_ADDRESS, else 127.0.0.1:50151.
"""

from __future__ import annotations

import json
import os
import sys

from contextd_client import ContextClient

HISTORY = [
    {"role": "user", "content": "What is the capital of France?"},
    {"role": "assistant", "content": "Paris."},
    {"role": "user", "content": "And its population?"},
    {"role": "assistant", "content": "About 2.1 million in the city itself."},
]


def main(argv: list[str]) -> int:
    address = argv[1] if len(argv) > 1 else os.environ.get("CONTEXTD_ADDRESS", "127.0.0.1:50151")
    with ContextClient(address) as client:
        result = client.build_messages(
            "And of Italy?",
            system_prompt="You are a geography tutor. Answer in one sentence.",
            history=HISTORY,
            # Small on purpose: the oldest exchange does not fit and is dropped.
            token_budget=45,
            output_format="openai",
        )
    assert result.payload is not None  # set for every output format but "neutral"
    report = result.report
    print(
        f"{report.total_tokens} tokens; history kept: {report.history_kept} of {len(HISTORY)}",
        file=sys.stderr,
    )
    print(json.dumps({"model": "gpt-4o-mini", **result.payload}, ensure_ascii=False, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
