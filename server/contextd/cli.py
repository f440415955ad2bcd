"""The ``contextd`` command."""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path

from contextd import __version__, logs
from contextd.config import Settings


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="contextd", description=__doc__)
    parser.add_argument("--version", action="version", version=f"contextd {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)
    serve = commands.add_parser(
        "serve",
        help="run the gRPC server",
        description="Run the gRPC server. Each flag can also be set as CONTEXTD_<FLAG>, "
        "for example CONTEXTD_PORT=50151.",
    )
    serve.add_argument("--host", help="address to listen on (default 127.0.0.1)")
    serve.add_argument(
        "--port", type=int, help="port to listen on, 0 for any free port (default 50151)"
    )
    serve.add_argument("--data-dir", type=Path, help="where contextd keeps its files")
    serve.add_argument("--default-tokenizer", help="tokenizer used when a request names none")
    serve.add_argument("--max-message-bytes", type=int, help="largest request or response")
    serve.add_argument("--max-history-messages", type=int, help="most history messages per request")
    serve.add_argument("--max-concurrent-rpcs", type=int, help="calls served at once")
    serve.add_argument(
        "--shutdown-grace", type=float, help="seconds in-flight calls get on shutdown"
    )
    serve.add_argument("--log-level", help="DEBUG, INFO, WARNING or ERROR")
    return parser


def main(argv: list[str] | None = None) -> None:
    args = _parser().parse_args(argv)
    if args.command == "serve":
        options = {k: v for k, v in vars(args).items() if k != "command"}
        settings = Settings.from_env(**options)
        logs.configure(settings.log_level)
        from contextd import server  # imported late: grpc start-up cost only when serving

        asyncio.run(server.serve(settings))


if __name__ == "__main__":
    main()
