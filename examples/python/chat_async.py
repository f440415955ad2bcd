"""One chat turn through contextd with the asyncio client, printed as it streams.

    python examples/python/chat_async.py [ADDRESS] [MESSAGE]

ADDRESS defaults to $CONTEXTD_ADDRESS, else 127.0.0.1:50151 (where `make run` listens).
The turn runs beside another task (a ticker counting the deltas per tenth of a second)
to show that streaming does not block the event loop. Ctrl-C cancels the turn.
"""

from __future__ import annotations

import asyncio
import os
import sys

from contextd_client import AsyncContextClient, TextDelta, TurnCompleted, TurnStarted


async def chat(address: str, message: str) -> str:
    """Streams one turn to stdout; returns its status."""
    async with AsyncContextClient(address, timeout=None) as client:
        status = ""
        async for event in client.stream_chat(message, user_id="example"):
            if isinstance(event, TurnStarted):
                print(f"[session {event.session_id}, turn {event.turn_index}]", flush=True)
            elif isinstance(event, TextDelta):
                print(event.text, end="", flush=True)
            elif isinstance(event, TurnCompleted):
                status = event.status
                print(f"\n[{status}: {len(event.final_text)} characters]")
        return status


async def main(argv: list[str]) -> int:
    address = argv[1] if len(argv) > 1 else os.environ.get("CONTEXTD_ADDRESS", "127.0.0.1:50151")
    message = argv[2] if len(argv) > 2 else "Hello! What do you see?"
    ticks = 0

    async def tick() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(0.1)
            ticks += 1

    ticker = asyncio.create_task(tick())
    try:
        status = await chat(address, message)
    finally:
        ticker.cancel()
    print(f"[the event loop ticked {ticks} times meanwhile]")
    return 0 if status == "ok" else 1


if __name__ == "__main__":
    try:
        sys.exit(asyncio.run(main(sys.argv)))
    except KeyboardInterrupt:
        # asyncio.run cancelled the turn's task, which cancelled the call.
        print("\n[cancelled]")
        sys.exit(130)
