"""The options of contextd's client commands: ``contextd chat``'s, and how a client command
(chat, health, mcp --stdio) reaches a server that serves TLS."""

from __future__ import annotations

import argparse
import os

DEFAULT_ADDRESS = "127.0.0.1:50151"


def add_chat_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``contextd chat``."""
    parser.add_argument(
        "question",
        nargs="?",
        default=None,
        help="a first question (interactive and piped mode), or the question of --once",
    )
    parser.add_argument(
        "--address",
        default=os.environ.get("CONTEXTD_ADDRESS") or DEFAULT_ADDRESS,
        help="host:port of the server (default: $CONTEXTD_ADDRESS, else %(default)s)",
    )
    parser.add_argument(
        "--user",
        default=None,
        help="user id the session belongs to (default: with an API key the key's user,"
        " else $USER, else 'local')",
    )
    # The default comes from the environment but is never shown: --help must not print it.
    parser.add_argument(
        "--api-key",
        default=os.environ.get("CONTEXTD_API_KEY") or None,
        metavar="KEY",
        help="API key for a server started with --auth api-key (default: $CONTEXTD_API_KEY)",
    )
    parser.add_argument("--session", default="", help="resume this session instead of a new one")
    parser.add_argument("--scenario", default="", help="scenario whose prompt template applies")
    parser.add_argument("--host", default="", help="host application, selects skills")
    parser.add_argument(
        "--once",
        nargs="?",
        const="",
        default=None,
        metavar="QUESTION",
        help="ask one question (here or as the positional argument), print the answer, exit",
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=None,
        help="deadline of each turn in seconds (default: none)",
    )
    parser.add_argument(
        "--max-prompt-tokens",
        type=_positive_int,
        default=0,
        metavar="N",
        help="prompt budget of each turn, at most the server's --max-prompt-tokens"
        " (default: the server's)",
    )
    parser.add_argument(
        "--warn-prompt-tokens",
        type=_positive_int,
        default=0,
        metavar="N",
        help="warn when a turn's prompt is estimated over N tokens"
        " (the server's --warn-prompt-tokens warns too)",
    )
    parser.add_argument(
        "--tokenizer-model",
        default="",
        metavar="NAME",
        help="tokenizer that counts the prompt, e.g. cl100k_base, o200k_base, estimate"
        " (default: the server's --default-tokenizer)",
    )
    parser.add_argument(
        "-v", "--verbose", action="store_true", help="print token usage after each turn"
    )
    add_tls_arguments(parser)


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive number of tokens, got {text!r}")
    return value


def add_tls_arguments(parser: argparse.ArgumentParser) -> None:
    """How a client command reaches a server that serves TLS (also ``contextd health``)."""
    parser.add_argument(
        "--tls-ca",
        default="",
        metavar="FILE",
        help="connect over TLS, trusting the PEM CA certificates in FILE",
    )
    parser.add_argument(
        "--tls-cert",
        default="",
        metavar="FILE",
        help="PEM client certificate for a server that requires one (mutual TLS)",
    )
    parser.add_argument("--tls-key", default="", metavar="FILE", help="private key of --tls-cert")
