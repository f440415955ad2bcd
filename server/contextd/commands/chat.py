"""contextd chat: chat with a contextd server from a terminal, through the Python SDK.

One session per process: a new one, or the one --session resumes. Three modes:

- interactive (stdin is a terminal): a REPL. It prints "session <id>", then
  answers each line typed at the "> " prompt as the model streams it. Lines that
  start with "/" are commands (/help lists them). Ctrl-C while an answer streams
  cancels that turn and returns to the prompt; /exit or Ctrl-D (end of input) leaves.
- --once "question" (or contextd chat "question" --once): one turn, then exit.
- piped (stdin is not a terminal): every non-blank line of stdin is a question,
  answered in turn in the same session; then exit. Commands work here too.

An optional positional question is asked first, in interactive and piped mode.
Leaving ends the session (EndSession, mode "interactive" or "once"); /new ends it too.
Answers go to stdout; the session line outside the REPL, tool calls, warnings and
errors go to stderr, so `contextd chat --once "..." > answer.txt` keeps only the
answer.

For a server started with --auth api-key, give a key of `contextd keys create` with
--api-key or, better (other users of the machine can read a command line), the
environment variable CONTEXTD_API_KEY. The session then belongs to the key's user
unless --user names one. The key is never printed, not even in error messages.

Exit status: 0 when every turn ended ok (the REPL: when it is left with /exit or
Ctrl-D, whatever the turns did); 1 when a turn (--once or piped) did not end ok:
status error, max_steps, requires_action or cancelled, or a turn the server refused;
2 for usage and connection errors: bad arguments, the SDK not installed, the server
unreachable, the credentials refused, the --session to resume not found (another
user's is not found either); 130 when Ctrl-C
interrupts --once or piped mode.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import os
import queue
import signal
import sys
import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import KW_ONLY, dataclass, field
from typing import TYPE_CHECKING, TextIO, TypeVar

from contextd.commands.client_args import add_chat_arguments

if TYPE_CHECKING:
    from contextd_client import (
        ChatStream,
        ContextClient,
        ContextdError,
        TurnCompleted,
        TurnStarted,
    )

_T = TypeVar("_T")

EXIT_OK = 0
EXIT_TURN_FAILED = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130
# Deadline of session calls (create, get, list) in seconds; turns have --timeout.
SESSION_CALL_TIMEOUT = 10.0
PROMPT = "> "

COMMANDS = """commands:
  /help      show this list
  /new       start a new session and print its id
  /session   print the current session id
  /history   print the messages stored in this session
  /exit      leave (also /quit, or Ctrl-D)
Ctrl-C while an answer streams cancels that turn."""

SDK_MISSING = """contextd chat: the Python SDK (contextd_client) is not installed.
Install it from a checkout of the contextd repository with:

    pip install ./clients/python
"""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="contextd chat",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_chat_arguments(parser)
    return parser


class _Interrupts:
    """Ctrl-C (SIGINT) only where the main thread waits for the user or the server.

    A process-wide SIGINT goes to any thread that does not block it, gRPC's included;
    Python then raises KeyboardInterrupt in the main thread only when that runs
    Python code again, and readline's input() waits in select() without doing so.
    And a KeyboardInterrupt raised inside gRPC's own Python code can leave a lock of
    the channel held. So SIGINT is blocked from the start, before gRPC starts any
    thread (threads inherit the mask), and unblocked in the main thread only around
    the waits in :meth:`call`: input(), a read of stdin, the next event of a turn
    (read by another thread). A Ctrl-C typed meanwhile waits for the next of them.
    """

    def __init__(self) -> None:
        self.enabled = (
            hasattr(signal, "pthread_sigmask")
            and threading.current_thread() is threading.main_thread()
        )
        self._saved: set[int | signal.Signals] | None = None

    def block(self) -> None:
        if self.enabled:
            self._saved = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})

    def restore(self) -> None:
        if self.enabled and self._saved is not None:
            signal.pthread_sigmask(signal.SIG_SETMASK, self._saved)

    def call(self, wait: Callable[..., _T], *args: object) -> _T:
        """``wait(*args)`` with Ctrl-C raising KeyboardInterrupt in it."""
        if not self.enabled:
            return wait(*args)
        try:
            signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
            return wait(*args)
        finally:
            signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})


_END = object()  # the end of a turn's events, in the queue between the threads


def _next_item(events: queue.SimpleQueue[object]) -> object:
    """The next item of ``events``; looking for a Ctrl-C every 0.1 s meanwhile (one that
    came just before the wait began would otherwise wait for the server's next event)."""
    while True:
        with contextlib.suppress(queue.Empty):
            return events.get(timeout=0.1)


def _read_stream(stream: ChatStream, events: queue.SimpleQueue[object]) -> None:
    """The reader thread of a turn: every event into ``events``, then an error or _END."""
    try:
        for event in stream:
            events.put(event)
    except BaseException as error:  # ContextdError, or a bug: the main thread raises it
        events.put(error)
    else:
        events.put(_END)


@dataclass(slots=True)
class _Chat:
    """One process's session and how its turns are shown."""

    client: ContextClient
    args: argparse.Namespace
    _: KW_ONLY
    interactive: bool
    interrupts: _Interrupts
    out: TextIO
    err: TextIO
    session_id: str = field(default="", init=False)
    # Whether stdout ends with a newline (or has nothing yet).
    _at_line_start: bool = field(default=True, init=False)

    @property
    def mode(self) -> str:
        """The session mode the server logs at the session's start and end."""
        return "interactive" if self.interactive else "once"

    # Output ---------------------------------------------------------------------------

    def write(self, text: str) -> None:
        if text:
            self.out.write(text)
            self.out.flush()
            self._at_line_start = text.endswith("\n")

    def _end_line(self) -> None:
        if not self._at_line_start:
            self.write("\n")

    def note(self, text: str) -> None:
        """A line on stderr, after whatever the answer printed so far."""
        self._end_line()
        self.err.write(text + "\n")
        self.err.flush()

    def info(self, text: str) -> None:
        """A line for the user: stdout in the REPL, stderr otherwise (stdout is answers)."""
        if self.interactive:
            self._end_line()
            self.write(text + "\n")
        else:
            self.note(text)

    def error(self, error: ContextdError, doing: str) -> None:
        import grpc

        if error.code == grpc.StatusCode.UNAVAILABLE:
            self.note(
                f"error: cannot reach contextd at {self.args.address} ({error.message}). "
                "Is the server running? Start one with `contextd serve`."
            )
            return
        self.note(f"error: {doing}: {error.code.name}: {error.message}")
        for violation in error.violations:
            self.note(f"  {violation.field}: {violation.description}")

    # Sessions -------------------------------------------------------------------------

    def start(self) -> None:
        """Resume ``--session`` or create a new session; raises ContextdError."""
        if self.args.session:
            session = self.client.get_session(self.args.user, self.args.session)
            self.session_id = session["id"]
            count = session["message_count"]
            self.info(f"session {self.session_id} (resumed, {count} messages)")
        else:
            self.new_session()

    def new_session(self) -> None:
        if self.session_id:
            self.end()
        session = self.client.create_session(
            self.args.user, scenario=self.args.scenario, host=self.args.host
        )
        self.session_id = session["id"]
        self.info(f"session {self.session_id}")

    def end(self) -> None:
        """End the session (session_end in its log); a failure is only reported."""
        import grpc
        from contextd_client import ContextdError

        try:
            self.client.end_session(self.args.user, self.session_id, mode=self.mode)
        except ContextdError as error:
            if error.code != grpc.StatusCode.UNAVAILABLE:  # already said by the turn
                self.error(error, "cannot end the session")

    def history(self) -> None:
        messages = self.client.list_messages(self.args.user, self.session_id)
        if not messages:
            self.write("(no messages yet)\n")
        for m in messages:
            line = f"[{m['turn_index']}] {m['role']}: {m['content']}"
            for call in m.get("tool_calls", ()):
                line += f"\n    tool call {call['name']}({call['arguments']})"
            if m["status"]:
                line += f"  [{m['status']}]"
            self.write(line + "\n")

    # Turns ----------------------------------------------------------------------------

    def turn(self, question: str) -> str:
        """Ask one question and show the answer as it streams.

        Returns the turn's status ("ok", "error", ...), "interrupted" when Ctrl-C
        cancelled it, or "failed" when the server refused it (the error is shown).
        Raises ContextdError only for UNAVAILABLE, so callers can decide to stop.
        """
        import grpc
        from contextd_client import ContextdError, TextDelta, ToolCallEvent, TurnStarted

        stream = self.client.stream_chat(
            question,
            user_id=self.args.user,
            session_id=self.session_id,
            scenario=self.args.scenario,
            host=self.args.host,
            mode=self.mode,
            token_budget=self.args.max_prompt_tokens,
            tokenizer=self.args.tokenizer_model,
            timeout=self.args.timeout,
        )
        events: queue.SimpleQueue[object] = queue.SimpleQueue()
        reader = threading.Thread(
            target=_read_stream, args=(stream, events), name="chat-turn", daemon=True
        )
        reader.start()
        streamed = False
        try:
            while (event := self.interrupts.call(_next_item, events)) is not _END:
                if isinstance(event, BaseException):
                    raise event
                if isinstance(event, TextDelta):
                    streamed = streamed or bool(event.text)
                    self.write(event.text)
                elif isinstance(event, ToolCallEvent):
                    self.note(f"[tool call] {event.name}({event.arguments})")
                elif isinstance(event, TurnStarted):
                    self._warn_prompt(event)
        except KeyboardInterrupt:
            stream.cancel()
            reader.join(5)
            self.note("[cancelled]")
            return "interrupted"
        except ContextdError as error:
            if error.code == grpc.StatusCode.UNAVAILABLE:
                raise
            self.error(error, "the turn failed")
            return "failed"
        completed = stream.completed
        if completed is None:
            self.note("error: the server ended the turn without a result")
            return "failed"
        if not streamed:
            self.write(completed.final_text)
        self._end_line()
        self._report(completed)
        return completed.status

    def _warn_prompt(self, started: TurnStarted) -> None:
        estimate, own = started.prompt_tokens_estimate, self.args.warn_prompt_tokens
        if own and estimate > own:
            self.note(
                f"[warning] the prompt is about {estimate} tokens, over --warn-prompt-tokens {own}"
            )
        elif started.prompt_tokens_warning:
            self.note(
                f"[warning] the prompt is about {estimate} tokens, over the server's warning "
                "threshold"
            )

    def _report(self, completed: TurnCompleted) -> None:
        status = completed.status
        if status == "error":
            self.note(f"[error] {completed.error_message or 'the turn failed'}")
        elif status == "max_steps":
            self.note("[max_steps] the turn stopped at the server's limit of model calls")
        elif status == "requires_action":
            calls = ", ".join(
                f"{c['name']}({c['arguments']})" for c in completed.pending_tool_calls
            )
            self.note(f"[requires_action] the model asked for tools this CLI does not run: {calls}")
        elif status == "cancelled":
            self.note("[cancelled] the server cancelled the turn")
        elif status != "ok":
            self.note(f"[{status}] the turn ended with status {status}")
        if self.args.verbose:
            turn, total = completed.turn_usage, completed.session_usage
            self.note(
                f"[usage] turn: prompt {turn.prompt_tokens} (estimate "
                f"{turn.prompt_tokens_estimate}), completion {turn.completion_tokens}; "
                f"session: prompt {total.prompt_tokens}, completion {total.completion_tokens}; "
                f"{completed.duration_ms} ms"
            )

    # Commands -------------------------------------------------------------------------

    def command(self, line: str) -> bool:
        """Run a slash command; False when it asks to leave."""
        from contextd_client import ContextdError

        name = line.split()[0].lower()
        if name in ("/exit", "/quit"):
            return False
        try:
            if name == "/help":
                self.write(COMMANDS + "\n")
            elif name == "/new":
                self.new_session()
            elif name == "/session":
                self.info(f"session {self.session_id}")
            elif name == "/history":
                self.history()
            else:
                self.note(f"unknown command {name}; /help lists the commands")
        except ContextdError as error:
            self.error(error, name)
        return True


def run(args: argparse.Namespace, *, stdin: TextIO | None = None) -> int:
    """Run ``contextd chat`` with parsed arguments; returns the exit status."""
    interrupts = _Interrupts()
    interrupts.block()  # before gRPC starts threads: see _Interrupts
    try:
        return _run(args, interrupts, sys.stdin if stdin is None else stdin)
    finally:
        interrupts.restore()


def _run(args: argparse.Namespace, interrupts: _Interrupts, stdin: TextIO) -> int:
    try:
        import contextd_client
    except ImportError:
        sys.stderr.write(SDK_MISSING)
        return EXIT_USAGE
    import grpc

    from contextd.root.tls import client_credentials

    question: str | None = args.question
    if args.once is not None:
        if args.once and args.question:
            return _usage("give the question either after --once or as the argument, not both")
        question = args.once or args.question
        if not question or not question.strip():
            return _usage('--once needs a question: contextd chat --once "your question"')
    interactive = args.once is None and stdin.isatty()
    try:
        credentials = client_credentials(args.tls_ca, args.tls_cert, args.tls_key)
    except SystemExit as error:  # a missing or unreadable file: a usage error here
        return _usage(str(error))
    if args.user is None:
        # Empty: the caller, i.e. the key's user (a different user would be refused).
        args.user = "" if args.api_key else os.environ.get("USER") or "local"
    try:
        client = contextd_client.ContextClient(
            args.address,
            timeout=SESSION_CALL_TIMEOUT,
            credentials=credentials,
            api_key=args.api_key,
        )
    except ValueError as error:  # a malformed key; the message never contains it
        return _usage(f"--api-key/CONTEXTD_API_KEY: {error}")
    chat = _Chat(
        client,
        args,
        interactive=interactive,
        interrupts=interrupts,
        out=sys.stdout,
        err=sys.stderr,
    )
    try:
        try:
            chat.start()
        except contextd_client.ContextdError as error:
            if error.code == grpc.StatusCode.NOT_FOUND:
                chat.note(f"error: session {args.session} not found")
            elif error.code == grpc.StatusCode.UNAUTHENTICATED:
                chat.note(
                    f"error: contextd at {args.address} refused the credentials: give a valid"
                    " key with --api-key or CONTEXTD_API_KEY"
                )
            else:
                chat.error(error, "cannot start the session")
            return EXIT_USAGE
        if args.once is not None:
            assert question is not None
            status = _batch(chat, [question])
        elif interactive:
            status = _repl(chat, question)
        else:
            lines = (line.rstrip("\r\n") for line in _lines(stdin, interrupts))
            status = _batch(chat, lines if question is None else itertools.chain([question], lines))
        chat.end()  # /exit, Ctrl-D, the end of --once or of the piped input
        return status
    except KeyboardInterrupt:
        chat.note("interrupted")
        return EXIT_INTERRUPTED
    finally:
        client.close()


def _batch(chat: _Chat, lines: Iterable[str]) -> int:
    """``--once`` and piped mode: every line a question (or a command), then exit."""
    from contextd_client import ContextdError

    status = EXIT_OK
    for line in lines:
        text = line.strip()
        if not text:
            continue
        if text.startswith("/"):
            if not chat.command(text):
                break
            continue
        try:
            result = chat.turn(line)
        except ContextdError as error:  # UNAVAILABLE: no point in asking the next one
            chat.error(error, "the turn failed")
            return EXIT_USAGE
        if result == "interrupted":
            return EXIT_INTERRUPTED
        if result != "ok":
            status = EXIT_TURN_FAILED
    return status


def _repl(chat: _Chat, first: str | None) -> int:
    """Interactive mode: read, answer, repeat, until /exit or end of input."""
    from contextd_client import ContextdError

    with contextlib.suppress(ImportError):  # line editing and history where available
        import readline  # noqa: F401

    chat.info("type a question, or /help for the commands")
    pending = first
    while True:
        if pending is not None:
            line, pending = pending, None
        else:
            try:
                line = chat.interrupts.call(input, PROMPT)
            except EOFError:  # Ctrl-D
                chat.write("\n")
                return EXIT_OK
            except KeyboardInterrupt:  # Ctrl-C at the prompt: a fresh prompt
                chat.write("\n")
                continue
        text = line.strip()
        if not text:
            continue
        if text.startswith("/"):
            if not chat.command(text):
                return EXIT_OK
            continue
        try:
            chat.turn(line)
        except ContextdError as error:  # UNAVAILABLE: say so, the user may retry
            chat.error(error, "the turn failed")


def _lines(stdin: TextIO, interrupts: _Interrupts) -> Iterator[str]:
    """The lines of stdin, each read where Ctrl-C can interrupt it."""
    while line := interrupts.call(stdin.readline):
        yield line


def _usage(message: str) -> int:
    sys.stderr.write(f"contextd chat: error: {message}\n")
    return EXIT_USAGE


def main(argv: list[str] | None = None) -> int:
    return run(build_parser().parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
