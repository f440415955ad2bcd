"""first_delta.py's bare relay, a process of its own: contextd's OpenAI provider reading the
fake and grpc.aio streaming each piece of text on at once, with nothing of a chat turn
between them. Run as ``python _relay.py <fake port>``; it prints ``PORT <n>`` and stops
when its stdin closes."""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # for tests.support.fakes

import grpc
import grpc.aio
from _common import stdin_closed
from contextd.core.messages import ChatMessage, Role
from contextd.providers.base import ModelRequest, ToolSpec
from contextd.providers.base import TextDelta as ModelText
from contextd.providers.openai_compat import OpenAIProvider
from contextd.v1 import chat_pb2 as cpb

from tests.support.fakes.helpers import FAKE_KEY

RELAY_SERVICE = "contextd.bench.Relay"
RELAY_METHOD = f"/{RELAY_SERVICE}/Relay"


async def run_relay(fake_port: int) -> None:
    """Serve RELAY_METHOD: the request is the user's text; each piece of text contextd's own
    OpenAI provider reads from the fake goes out as a StreamChatResponse TextDelta at once.
    Print PORT; stop at EOF."""
    provider = OpenAIProvider(api_key=FAKE_KEY, base_url=f"http://127.0.0.1:{fake_port}/v1")
    tools = [ToolSpec("memory_search", "", {"type": "object"})]  # as a turn's: the script

    async def relay(request: bytes, context: grpc.aio.ServicerContext[Any, Any]) -> Any:
        # The response's headers go out first, as they go out with a turn's TurnStarted
        # before the model is called: the first delta is then a data frame alone.
        await context.send_initial_metadata(())
        asked = ModelRequest([ChatMessage(Role.USER, request.decode())], tools=tools)
        async with contextlib.aclosing(provider.stream(asked)) as events:
            async for event in events:
                if isinstance(event, ModelText):
                    response = cpb.StreamChatResponse()
                    response.text_delta.text = event.text
                    yield response.SerializeToString()

    handler = grpc.unary_stream_rpc_method_handler(
        relay, request_deserializer=lambda b: b, response_serializer=lambda b: b
    )
    server = grpc.aio.server()
    server.add_generic_rpc_handlers(
        [grpc.method_handlers_generic_handler(RELAY_SERVICE, {"Relay": handler})]
    )
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    print(f"PORT {port}", flush=True)
    await stdin_closed()
    await server.stop(0)
    await provider.aclose()


def spawn_relay(fake_port: int) -> tuple[subprocess.Popen[str], int]:
    process = subprocess.Popen(
        [sys.executable, __file__, str(fake_port)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    line = process.stdout.readline()
    if not line.startswith("PORT "):
        process.kill()
        process.wait()
        raise RuntimeError("the relay did not start")
    return process, int(line.split()[1])


if __name__ == "__main__":
    asyncio.run(run_relay(int(sys.argv[1])))
