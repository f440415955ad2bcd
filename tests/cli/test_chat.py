"""``contextd chat``: --once, piped stdin and the REPL in a pseudo-terminal.

Against the live echo server (``address``), and against the scripted fake server of
``tests.clients.test_python_chat`` for what echo cannot do (slow turns to cancel with Ctrl-C, tool
calls, error statuses). The REPL runs in a real pseudo-terminal (stdlib ``pty``): it
is the session leader with the terminal as its controlling terminal, so Ctrl-C typed
into the terminal reaches it as SIGINT, as it would from a user's shell.
"""

from __future__ import annotations

import codecs
import os
import re
import select
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from contextd_client import ContextClient

from tests.support.fake_chat_server import FakeChatServer, closed_port, fake_chat_server
from tests.support.foreground import as_foreground_job
from tests.support.paths import ROOT

CHAT = [sys.executable, "-m", "contextd", "chat"]
SESSION_LINE = re.compile(r"^session (\S+)", re.MULTILINE)

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX terminals only")


def new_user() -> str:
    return f"u-{uuid.uuid4().hex[:8]}"


def chat(
    *args: str, stdin: str = "", env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run ``contextd chat`` with piped stdin (so not a terminal)."""
    return subprocess.run(
        [*CHAT, *args],
        input=stdin,
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=60,
        cwd=ROOT,
        env={**os.environ, **(env or {})},
    )


@pytest.fixture
def fake() -> Iterator[FakeChatServer]:
    with fake_chat_server() as server:
        yield server


# --once and piped stdin ----------------------------------------------------------------


def test_once_prints_only_the_answer(address: str) -> None:
    user = new_user()
    # The address from CONTEXTD_ADDRESS, the question after --once.
    done = chat("--user", user, "--once", "你好，我叫小明", env={"CONTEXTD_ADDRESS": address})
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("echo: I received 2 messages")
    assert done.stdout.endswith("Your last message was: “你好，我叫小明”\n")
    assert done.stdout.count("\n") == 1  # nothing but the answer
    [session_id] = SESSION_LINE.findall(done.stderr)
    with ContextClient(address) as client:
        messages = client.list_messages(user, session_id)
    assert [m["role"] for m in messages] == ["user", "assistant"]
    assert messages[1]["content"] + "\n" == done.stdout


def test_once_as_a_flag_after_the_question(address: str) -> None:
    done = chat("--address", address, "hello there", "--once", "--verbose")
    assert done.returncode == 0, done.stderr
    assert "“hello there”" in done.stdout
    assert "[usage] turn: prompt" in done.stderr


def test_piped_questions_share_one_session(address: str) -> None:
    user = new_user()
    done = chat("--address", address, "--user", user, stdin="first question\n\nsecond one\n")
    assert done.returncode == 0, done.stderr
    answers = done.stdout.splitlines()
    assert len(answers) == 2
    assert answers[0].endswith("“first question”")
    # The second turn saw the first: system, first question and answer, second question.
    assert "4 messages" in answers[1] and answers[1].endswith("“second one”")
    [session_id] = SESSION_LINE.findall(done.stderr)
    with ContextClient(address) as client:
        messages = client.list_messages(user, session_id)
    assert [(m["role"], m["turn_index"]) for m in messages] == [
        ("user", 1),
        ("assistant", 1),
        ("user", 2),
        ("assistant", 2),
    ]


def test_prompt_budget_tokenizer_and_warning(address: str) -> None:
    # The specification's CLI settings: --max-prompt-tokens, --warn-prompt-tokens and
    # --tokenizer-model (the encoding that counts).
    user = new_user()
    args = ["--address", address, "--user", user, "--tokenizer-model", "estimate"]
    questions = "first question\nsecond one\n"
    roomy = chat(*args, "--warn-prompt-tokens", "1000", stdin=questions)
    assert roomy.returncode == 0, roomy.stderr
    assert "4 messages" in roomy.stdout.splitlines()[1]
    assert "[warning]" not in roomy.stderr
    [roomy_session] = SESSION_LINE.findall(roomy.stderr)

    # A budget with no room for the first turn: the second sees only its own question.
    tight = chat(*args, "--max-prompt-tokens", "30", "--warn-prompt-tokens", "5", stdin=questions)
    assert tight.returncode == 0, tight.stderr
    answers = tight.stdout.splitlines()
    assert "2 messages" in answers[1] and answers[1].endswith("“second one”")
    warnings = [line for line in tight.stderr.splitlines() if line.startswith("[warning]")]
    assert len(warnings) == 2 and all("over --warn-prompt-tokens 5" in w for w in warnings)
    [tight_session] = SESSION_LINE.findall(tight.stderr)
    with ContextClient(address) as client:
        for session_id in (roomy_session, tight_session):
            [start] = [e for e in client.export_events(user, session_id)][:1]
            assert start["meta"]["tokenizer"] == "estimate"


@pytest.mark.parametrize("flag", ["--max-prompt-tokens", "--warn-prompt-tokens"])
def test_token_settings_are_positive(address: str, flag: str) -> None:
    for value in ("0", "-5", "many"):
        done = chat("--address", address, flag, value, "--once", "hi")
        assert done.returncode == 2 and "positive number of tokens" in done.stderr


def test_piped_commands_and_a_first_question(address: str) -> None:
    user = new_user()
    done = chat(
        "--address",
        address,
        "--user",
        user,
        "opening question",
        stdin="/session\n/new\nin the new session\n/history\n/exit\nnever asked\n",
    )
    assert done.returncode == 0, done.stderr
    first, _same, second = SESSION_LINE.findall(done.stderr)
    assert _same == first and second != first
    assert "“opening question”" in done.stdout and "“in the new session”" in done.stdout
    assert "never asked" not in done.stdout
    # /history printed the new session only: its question and answer.
    assert "[1] user: in the new session" in done.stdout
    assert "opening question" not in done.stdout.split("[1] user:")[1]


def ends(client: ContextClient, user: str, session_id: str) -> list[tuple[str, str]]:
    """The session's start and end events with their modes, in order."""
    return [
        (e["type"], e["meta"]["mode"])
        for e in client.export_events(user, session_id)
        if e["type"] in ("session_start", "session_end")
    ]


def test_leaving_ends_the_session(address: str) -> None:
    user = new_user()
    done = chat("--address", address, "--user", user, "--once", "one question")
    assert done.returncode == 0, done.stderr
    [once] = SESSION_LINE.findall(done.stderr)
    done = chat("--address", address, "--user", user, stdin="piped\n/new\nnext\n")
    assert done.returncode == 0, done.stderr
    piped, renewed = SESSION_LINE.findall(done.stderr)
    done = chat("--address", address, "--user", user, "--session", once, "--once", "again")
    assert done.returncode == 0, done.stderr
    with ContextClient(address) as client:
        # The resumed session opened again at its next turn and ended again.
        assert ends(client, user, once) == [
            ("session_start", "once"),
            ("session_end", "once"),
            ("session_start", "once"),
            ("session_end", "once"),
        ]
        # /new ends the session it leaves; piped input is not interactive.
        assert ends(client, user, piped) == [("session_start", "once"), ("session_end", "once")]
        assert ends(client, user, renewed) == [("session_start", "once"), ("session_end", "once")]


def test_resume_a_session(address: str) -> None:
    user = new_user()
    with ContextClient(address) as client:
        session_id = client.create_session(user)["id"]
        client.stream_chat("remember me", user_id=user, session_id=session_id).result()
    done = chat("--address", address, "--user", user, "--session", session_id, "--once", "hi")
    assert done.returncode == 0, done.stderr
    assert f"session {session_id} (resumed, 2 messages)" in done.stderr
    assert "4 messages" in done.stdout

    # Another user's session is not found, as if it did not exist.
    other = chat("--address", address, "--user", "intruder", "--session", session_id, "--once", "x")
    assert other.returncode == 2
    assert f"session {session_id} not found" in other.stderr
    missing = chat("--address", address, "--user", user, "--session", "0" * 32, "--once", "x")
    assert missing.returncode == 2 and "not found" in missing.stderr


def test_connection_refused_exits_2() -> None:
    done = chat("--address", f"127.0.0.1:{closed_port()}", "--once", "hi")
    assert done.returncode == 2
    assert "cannot reach contextd at 127.0.0.1:" in done.stderr
    assert "contextd serve" in done.stderr and "Traceback" not in done.stderr
    assert done.stdout == ""


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--once"], "--once needs a question"),
        (["--once", "   "], "--once needs a question"),
        (["--once", "a", "b"], "not both"),
        (["--timeout", "soon"], "invalid float value"),
    ],
)
def test_usage_errors_exit_2(address: str, args: list[str], message: str) -> None:
    done = chat("--address", address, *args)
    assert done.returncode == 2 and message in done.stderr


def test_without_the_sdk_it_says_how_to_install_it() -> None:
    code = (
        "import sys; sys.modules['contextd_client'] = None\n"  # makes the import fail
        "from contextd.commands.main import main; main(['chat', '--once', 'hi'])"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=ROOT
    )
    assert done.returncode == 2
    assert "pip install ./clients/python" in done.stderr and "Traceback" not in done.stderr


def test_turn_statuses_and_tool_calls_are_shown(fake: FakeChatServer) -> None:
    tool = chat("--address", fake.address, "--once", "tool please")
    assert tool.returncode == 1
    assert tool.stdout == "Let me check.\n"
    assert '[tool call] get_weather({"city":"Paris"})' in tool.stderr
    assert "[requires_action] the model asked for tools this CLI does not run" in tool.stderr

    failed = chat("--address", fake.address, "--once", "fail now")
    assert failed.returncode == 1
    assert failed.stdout == "Half an\n"
    assert "[error] the provider went away" in failed.stderr

    warned = chat("--address", fake.address, "--once", "warn me")
    assert warned.returncode == 0 and "[warning] the prompt is about 7000 tokens" in warned.stderr

    # Piped: every question is asked; one that fails makes the exit status 1.
    piped = chat("--address", fake.address, stdin="fail\nfine\n")
    assert piped.returncode == 1
    assert piped.stdout == "Half an\nfake answer to: fine\n"
    assert len(fake.sessions) == 4  # one per process
    # Each process ended its session, whatever its turns did; each turn said its mode.
    assert [(e.session_id, e.mode) for e in fake.ended] == [(s, "once") for s in fake.sessions]
    assert {r.mode for r in fake.requests} == {"once"}


# The REPL in a pseudo-terminal --------------------------------------------------------

# Run in the child before contextd chat: become the terminal's controlling process
# (Popen's start_new_session made it a session leader); as_foreground_job adds the
# signal dispositions a shell gives its foreground job.
_CONTROLLING_TTY = "import fcntl, termios\nfcntl.ioctl(0, termios.TIOCSCTTY, 0)\n"


class Terminal:
    """``contextd chat`` on a pseudo-terminal: type into it, wait for what it prints."""

    def __init__(self, *args: str) -> None:
        master, slave = os.openpty()
        self.master = master
        self.process = subprocess.Popen(
            as_foreground_job(
                [sys.executable, "-m", "contextd", "chat", *args], before=_CONTROLLING_TTY
            ),
            stdin=slave,
            stdout=slave,
            stderr=slave,
            cwd=ROOT,
            # PYTHONFAULTHANDLER: on a timeout, expect() has it print its threads' stacks.
            env={**os.environ, "TERM": "dumb", "PYTHONFAULTHANDLER": "1"},
            start_new_session=True,
        )
        os.close(slave)
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self.output = ""
        self._seen = 0  # output before this was matched already

    def _read(self, timeout: float) -> bool:
        """Read what is there within ``timeout``; False at the end of output."""
        ready, _, _ = select.select([self.master], [], [], timeout)
        if not ready:
            return True
        try:
            data = os.read(self.master, 4096)
        except OSError:  # EIO: the child closed the terminal
            return False
        self.output += self._decoder.decode(data).replace("\r\n", "\n")
        return bool(data)

    def expect(self, pattern: str, timeout: float = 15) -> re.Match[str]:
        """Wait for ``pattern`` in the output printed since the last match."""
        regex = re.compile(pattern, re.MULTILINE)
        deadline = time.monotonic() + timeout
        while True:
            match = regex.search(self.output, self._seen)
            if match:
                self._seen = match.end()
                return match
            left = deadline - time.monotonic()
            if left <= 0 or not self._read(min(left, 0.2)):
                if match := regex.search(self.output, self._seen):
                    self._seen = match.end()
                    return match
                raise AssertionError(
                    f"{pattern!r} not printed; since the last match:\n{self._dump()}"
                )

    def _dump(self) -> str:
        """The output since the last match, and the stacks of a child still running."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGABRT)
            deadline = time.monotonic() + 3
            while time.monotonic() < deadline and self._read(0.2):
                pass
        return self.output[self._seen :]

    def type(self, text: str) -> None:
        os.write(self.master, text.encode())

    def interrupt_at_prompt(self) -> None:
        """Ctrl-C at the prompt just printed. Readline prints the prompt before it waits
        for input, and a SIGINT in between is noticed only at the next key (so in
        CPython's own REPL too): a person is never that fast, a test is."""
        time.sleep(0.3)
        self.type("\x03")

    def wait(self, timeout: float = 15) -> int:
        deadline = time.monotonic() + timeout
        while self.process.poll() is None and time.monotonic() < deadline:
            self._read(0.1)
        return self.process.wait(max(deadline - time.monotonic(), 0.1))

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        os.close(self.master)


@pytest.fixture
def terminals() -> Iterator[list[Terminal]]:
    opened: list[Terminal] = []
    yield opened
    for terminal in opened:
        terminal.close()


def test_repl(address: str, terminals: list[Terminal]) -> None:
    user = new_user()
    term = Terminal("--address", address, "--user", user)
    terminals.append(term)
    first = term.expect(r"^session ([0-9a-f]{32})$")[1]
    term.expect("^> ")
    term.type("What is contextd?\n")
    term.expect(r"^echo: I received 2 messages .*“What is contextd\?”$")
    term.expect("^> ")

    term.type("/help\n")
    for command in ("/help", "/new", "/session", "/history", "/exit"):
        term.expect(f"^  {command} ")
    term.expect("Ctrl-C while an answer streams cancels that turn")

    term.type("/new\n")
    second = term.expect(r"^session ([0-9a-f]{32})$")[1]
    assert second != first
    term.type("In the new one\n")
    term.expect(r"^echo: I received 2 messages .*“In the new one”$")  # a fresh window
    term.type("/bogus\n")
    term.expect("unknown command /bogus; /help lists the commands")
    term.type("/exit\n")
    assert term.wait() == 0

    with ContextClient(address) as client:
        for session_id in (first, second):  # /new and /exit end the session they leave
            assert ends(client, user, session_id) == [
                ("session_start", "interactive"),
                ("session_end", "interactive"),
            ]
        first_messages = client.list_messages(user, first)
        assert [m["role"] for m in first_messages] == ["user", "assistant"]
        assert first_messages[0]["content"] == "What is contextd?"
        assert len(client.list_messages(user, second)) == 2


def test_repl_first_question_and_ctrl_d(address: str, terminals: list[Terminal]) -> None:
    user = new_user()
    term = Terminal("--address", address, "--user", user, "a first question")
    terminals.append(term)
    session_id = term.expect(r"^session (\S+)$")[1]
    term.expect(r"^echo: .*“a first question”$")
    term.expect("^> ")
    term.interrupt_at_prompt()  # a fresh prompt
    term.expect("^> ")
    term.type("\x04")  # Ctrl-D: end of input, which ends the session
    assert term.wait() == 0
    with ContextClient(address) as client:
        assert ends(client, user, session_id) == [
            ("session_start", "interactive"),
            ("session_end", "interactive"),
        ]


def test_ctrl_c_cancels_the_streaming_turn(fake: FakeChatServer, terminals: list[Terminal]) -> None:
    term = Terminal("--address", fake.address, "--user", "ada")
    terminals.append(term)
    term.expect(r"^session fake-1$")
    term.expect("^> ")
    term.type("slow story\n")
    term.expect(r"w0 w1 w2 ")  # the answer streams, delta by delta
    assert not fake.finished.is_set()
    term.type("\x03")
    term.expect(r"\[cancelled\]")
    assert fake.cancelled.wait(5)  # the server saw the call cancelled
    assert not fake.finished.is_set()
    term.expect("^> ")
    # The REPL goes on in the same session.
    term.type("still there?\n")
    term.expect("^fake answer to: still there\\?$")
    assert [r.session.session_id for r in fake.requests] == ["fake-1", "fake-1"]
    term.type("/exit\n")
    assert term.wait() == 0


def test_ctrl_c_reaches_the_repl_when_the_tests_ignore_it(
    fake: FakeChatServer, terminals: list[Terminal]
) -> None:
    """As under `make test &`: started with SIGINT ignored, the terminal still delivers it."""
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        term = Terminal("--address", fake.address, "--user", "ada")
    finally:
        signal.signal(signal.SIGINT, previous)
    terminals.append(term)
    term.expect("^> ")
    term.type("slow story\n")
    term.expect(r"w0 w1 ")
    term.type("\x03")
    term.expect(r"\[cancelled\]")
    term.expect("^> ")
    term.type("/exit\n")
    assert term.wait() == 0


def test_repl_shows_tool_calls_and_errors(fake: FakeChatServer, terminals: list[Terminal]) -> None:
    term = Terminal("--address", fake.address)
    terminals.append(term)
    term.expect("^> ")
    term.type("tool please\n")
    term.expect(r"^Let me check\.$")
    term.expect(r'^\[tool call\] get_weather\(\{"city":"Paris"\}\)$')
    term.expect(r"^\[requires_action\] .*get_weather")
    term.type("fail\n")
    term.expect(r"^\[error\] the provider went away$")
    term.type("/exit\n")
    assert term.wait() == 0  # the REPL was left normally, whatever the turns did


def test_repl_with_no_server(terminals: list[Terminal]) -> None:
    term = Terminal("--address", f"127.0.0.1:{closed_port()}")
    terminals.append(term)
    term.expect("cannot reach contextd at 127.0.0.1:")
    assert term.wait() == 2


def _threads_taking_sigint(pid: int) -> list[str]:
    """Names of the process's threads that do not block SIGINT (Linux /proc)."""
    names = []
    for task in sorted(Path(f"/proc/{pid}/task").iterdir()):
        status = dict(line.split(":\t", 1) for line in (task / "status").read_text().splitlines())
        if not int(status["SigBlk"], 16) & (1 << (signal.SIGINT - 1)):
            names.append(f"{task.name} {status['Name']}")
    return names


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="needs Linux /proc")
def test_only_the_main_thread_takes_ctrl_c(fake: FakeChatServer, terminals: list[Terminal]) -> None:
    """gRPC's threads block SIGINT: else Ctrl-C could land on one of them, unnoticed
    by the main thread while readline waits for input. The main thread itself takes
    it only while it waits (between two events it blocks it too, for a moment)."""
    term = Terminal("--address", fake.address)
    terminals.append(term)
    term.expect("^> ")
    pid = term.process.pid
    main = f"{pid} python"
    assert _threads_taking_sigint(pid) == [main]  # at the prompt
    term.type("slow story\n")
    term.expect("w0 w1 ")
    assert len(list(Path(f"/proc/{pid}/task").iterdir())) > 2  # gRPC's threads and ours
    samples = []
    for _ in range(20):  # while the turn streams
        samples.append(_threads_taking_sigint(pid))
        time.sleep(0.01)
    assert all(taking in ([main], []) for taking in samples), samples
    assert [main] in samples
    term.type("\x03")
    term.expect(r"\[cancelled\]")
    term.type("/exit\n")
    assert term.wait() == 0
