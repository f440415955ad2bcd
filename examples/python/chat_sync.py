"""One chat turn through contextd with the synchronous client, printed as it streams.

    python examples/python/chat_sync.py [ADDRESS] [MESSAGE]

ADDRESS defaults to $CONTEXTD_ADDRESS, else 127.0.0.1:50151 (where `make run` listens).
With a server started as `contextd serve --echo-delay-ms 80` the answer arrives word by
word; Ctrl-C mid-answer cancels the turn, and contextd keeps what was said so far,
marked cancelled.
"""

from __future__ import annotations

import os
import sys

from contextd_client import ContextClient, TextDelta, TurnCompleted, TurnStarted


def main(argv: list[str]) -> int:
    address = argv[1] if len(argv) > 1 else os.environ.get("CONTEXTD_ADDRESS", "127.0.0.1:50151")
    message = argv[2] if len(argv) > 2 else "Hello! What do you see?"
    # No deadline: a real model's answer may take a while.
    with ContextClient(address, timeout=None) as client:
        stream = client.stream_chat(message, user_id="example")
        try:
            for event in stream:
                if isinstance(event, TurnStarted):
                    print(f"[session {event.session_id}, turn {event.turn_index}]", flush=True)
                elif isinstance(event, TextDelta):
                    print(event.text, end="", flush=True)
                elif isinstance(event, TurnCompleted):
                    usage = event.turn_usage
                    print(
                        f"\n[{event.status}: {usage.prompt_tokens} prompt tokens, "
                        f"{usage.completion_tokens} completion tokens]"
                    )
        except KeyboardInterrupt:
            # The client cancelled the call already; the server stores the partial answer.
            print("\n[cancelled]")
            return 130
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
