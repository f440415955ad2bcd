"""Reaching one given worker of a test server started with ``--workers``."""

from __future__ import annotations

import time

import grpc
from contextd.v1 import context_pb2 as pb
from contextd.v1 import context_pb2_grpc

from tests.support.server import ServerProcess

# Channels of one process share their connections unless each keeps its own.
OWN_CONNECTION = [("grpc.use_local_subchannel_pool", 1)]


def count_tokens(channel: grpc.Channel) -> None:
    stub = context_pb2_grpc.ContextServiceStub(channel)
    stub.CountTokens(pb.CountTokensRequest(texts=["one two three"]))


def channel_to_worker(server: ServerProcess, index: int) -> tuple[grpc.Channel, int]:
    """A channel whose connection the kernel gave to worker ``index``, and the calls
    made to find one (CountTokens, each on a connection of its own)."""
    for calls in range(1, 65):
        channel = grpc.insecure_channel(server.address, options=OWN_CONNECTION)
        since = len(server.logs("rpc"))
        count_tokens(channel)
        deadline = time.monotonic() + 10
        while len(lines := server.logs("rpc")) <= since:
            assert time.monotonic() < deadline
            time.sleep(0.01)
        if lines[since]["worker"] == index:
            return channel, calls
        channel.close()
    raise AssertionError(f"no connection reached worker {index}")
