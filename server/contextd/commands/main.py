"""The ``contextd`` command."""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from types import ModuleType

from contextd import __version__
from contextd.commands import chat as chat_command
from contextd.commands import client_args
from contextd.commands import keys as keys_command
from contextd.commands import store as store_command
from contextd.config import Settings, add_arguments
from contextd.root import logs


def _described(
    commands: argparse._SubParsersAction[argparse.ArgumentParser],
    module: ModuleType,
    name: str,
    help: str,
) -> argparse.ArgumentParser:
    """The command ``name``, described by ``module``'s docstring laid out as written."""
    parser = commands.add_parser(
        name,
        help=help,
        description=module.__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    return parser


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="contextd", description=__doc__)
    parser.add_argument("--version", action="version", version=f"contextd {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)
    serve = commands.add_parser(
        "serve",
        help="run the gRPC server",
        description="Run the gRPC server. Each flag can also be set as an environment "
        "variable CONTEXTD_<FLAG>, for example CONTEXTD_PORT=50151; flags win.",
    )
    add_arguments(serve)
    health = commands.add_parser(
        "health", help="exit 0 if a server answers SERVING (for container health checks)"
    )
    health.add_argument("--address", default="127.0.0.1:50151", help="host:port of the server")
    health.add_argument("--timeout", type=float, default=3.0, help="seconds to wait")
    client_args.add_tls_arguments(health)
    client_args.add_chat_arguments(
        _described(
            commands,
            chat_command,
            "chat",
            "chat with a server from the terminal (needs the Python SDK, clients/python)",
        )
    )
    keys_command.add_arguments(
        _described(
            commands,
            keys_command,
            "keys",
            "create, list and revoke API keys for --auth api-key (also while serving)",
        )
    )
    store_command.add_arguments(
        _described(
            commands,
            store_command,
            "store",
            "copy everything between databases, SQLite and PostgreSQL (servers stopped)",
        )
    )
    mcp = commands.add_parser(
        "mcp",
        help="serve MCP over standard input and output for a running server (desktop apps)",
        description=_MCP_DESCRIPTION,
    )
    mcp.add_argument(
        "--stdio", action="store_true", help="serve MCP over standard input and output"
    )
    mcp.add_argument("--address", default="127.0.0.1:50151", help="host:port of the server")
    client_args.add_tls_arguments(mcp)
    return parser


_MCP_DESCRIPTION = (
    "Serve MCP (tools for memories, sessions and context) over standard input and "
    "output, calling the contextd server at --address: as the key in CONTEXTD_API_KEY, "
    "and with --auth none (or a service key) as the user in CONTEXTD_USER. Over HTTP, "
    "MCP is served by `contextd serve --mcp-port` instead."
)


def _mcp(args: argparse.Namespace) -> int:
    if not args.stdio:
        print(
            "contextd mcp: give --stdio (over HTTP, `contextd serve --mcp-port` serves MCP)",
            file=sys.stderr,
        )
        return 2
    # Standard output carries the protocol: logs and gRPC's own lines go to standard error.
    logs.configure("WARNING")
    os.environ.setdefault("GRPC_VERBOSITY", "ERROR")
    from contextd.fronts.mcp import stdio  # imported late: the MCP SDK only when serving it
    from contextd.root.tls import client_credentials

    credentials = client_credentials(args.tls_ca, args.tls_cert, args.tls_key)
    return asyncio.run(stdio.serve(args.address, credentials))


def _health(args: argparse.Namespace) -> int:
    import grpc
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    from contextd.root.tls import client_credentials

    address, timeout = args.address, args.timeout
    credentials = client_credentials(args.tls_ca, args.tls_cert, args.tls_key)
    channel = (
        grpc.insecure_channel(address)
        if credentials is None
        else grpc.secure_channel(address, credentials)
    )
    with channel:
        try:
            reply = health_pb2_grpc.HealthStub(channel).Check(
                health_pb2.HealthCheckRequest(), timeout=timeout
            )
        except grpc.RpcError as error:
            print(f"{address}: {error.code().name}", file=sys.stderr)
            return 1
    status = health_pb2.HealthCheckResponse.ServingStatus.Name(reply.status)
    print(f"{address}: {status}")
    return 0 if reply.status == health_pb2.HealthCheckResponse.SERVING else 1


def main(argv: list[str] | None = None) -> None:
    args = _parser().parse_args(argv)
    # Whatever any command writes (data, logs, sockets) is for this account alone,
    # on top of the modes the store sets itself.
    os.umask(os.umask(0) | 0o077)
    if args.command == "serve":
        options = {k: v for k, v in vars(args).items() if k != "command"}
        settings = Settings.from_env(**options)
        logs.configure(settings.log_level)
        # gRPC's C core writes its own plain-text lines to standard error, one per
        # refused TLS handshake among them; only its errors go among the JSON lines.
        os.environ.setdefault("GRPC_VERBOSITY", "ERROR")
        if settings.worker_count() > 1:
            # imported late: grpc start-up cost only when serving
            from contextd.root import workers

            workers.serve_workers(settings)
        else:
            from contextd.root import server

            asyncio.run(server.serve(settings))
    elif args.command == "health":
        sys.exit(_health(args))
    elif args.command == "chat":
        sys.exit(chat_command.run(args))
    elif args.command == "keys":
        sys.exit(keys_command.run(args))
    elif args.command == "store":
        sys.exit(store_command.run(args))
    elif args.command == "mcp":
        sys.exit(_mcp(args))


if __name__ == "__main__":
    main()
