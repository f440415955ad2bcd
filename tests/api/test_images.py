"""Image content parts through BuildMessages, the store, ListMessages and the echo provider."""

from __future__ import annotations

import base64
import json
import uuid
from collections.abc import Iterator

import grpc
import pytest
from contextd.v1 import chat_pb2 as cpb
from contextd.v1 import chat_pb2_grpc, context_pb2_grpc, sessions_pb2_grpc
from contextd.v1 import context_pb2 as pb
from contextd.v1 import sessions_pb2 as spb

from tests.support import images
from tests.support.status import violations

pytestmark = pytest.mark.both_backends

PNG = images.png(2, 2)
PNG_B64 = base64.b64encode(PNG).decode()


class Stubs:
    def __init__(self, channel: grpc.Channel) -> None:
        self.context = context_pb2_grpc.ContextServiceStub(channel)
        self.sessions = sessions_pb2_grpc.SessionServiceStub(channel)
        self.chat = chat_pb2_grpc.ChatServiceStub(channel)


@pytest.fixture(scope="module")
def api(address: str) -> Iterator[Stubs]:
    with grpc.insecure_channel(address) as channel:
        yield Stubs(channel)


def png_part(**image: object) -> pb.ContentPart:
    return pb.ContentPart(image=pb.ImagePart(data=PNG, media_type="image/png", **image))  # type: ignore[arg-type]


def url_part(url: str = "https://example.com/cat.png", **image: object) -> pb.ContentPart:
    return pb.ContentPart(image=pb.ImagePart(url=url, **image))  # type: ignore[arg-type]


def text_part(text: str) -> pb.ContentPart:
    return pb.ContentPart(text=text)


def image_history() -> list[pb.Message]:
    return [
        pb.Message(role=pb.ROLE_USER, parts=[png_part()]),  # an image alone: not empty
        pb.Message(role=pb.ROLE_ASSISTANT, content="A black square."),
    ]


def test_openai_payload_and_counts(api: Stubs) -> None:
    response = api.context.BuildMessages(
        pb.BuildMessagesRequest(
            system_prompts=["Be brief."],
            history=image_history(),
            user_message_parts=[
                text_part("And this one?"),
                url_part(detail=pb.IMAGE_DETAIL_LOW),
            ],
            token_budget=5000,
            output_format=pb.OUTPUT_FORMAT_OPENAI,
        )
    )
    report = response.report
    assert report.history_kept == 2 and not report.dropped
    # cl100k_base: the 2x2 PNG is one tile (255), the low-detail URL image 85.
    assert report.image_tokens == 255 + 85
    messages = json.loads(response.payload_json)["messages"]
    assert messages[1] == {
        "role": "user",
        "content": [
            {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG_B64}"}}
        ],
    }
    assert messages[3] == {
        "role": "user",
        "content": [
            {"type": "text", "text": "And this one?"},
            {
                "type": "image_url",
                "image_url": {"url": "https://example.com/cat.png", "detail": "low"},
            },
        ],
    }
    first, user = response.messages[1], response.messages[3]
    assert first.content == "" and first.parts[0].image.data == PNG
    assert first.tokens == 3 + 255
    assert user.parts[1].image.url == "https://example.com/cat.png"
    assert report.user_message_tokens == user.tokens


def test_anthropic_payload(api: Stubs) -> None:
    response = api.context.BuildMessages(
        pb.BuildMessagesRequest(
            history=image_history(),
            user_message_parts=[url_part(width=1092, height=1092), text_part("Compare.")],
            token_budget=9000,
            tokenizer="estimate",
            output_format=pb.OUTPUT_FORMAT_ANTHROPIC,
        )
    )
    turns = json.loads(response.payload_json)["messages"]
    assert turns[0]["content"] == [
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG_B64}}
    ]
    assert turns[2]["content"] == [
        {"type": "image", "source": {"type": "url", "url": "https://example.com/cat.png"}},
        {"type": "text", "text": "Compare."},
    ]
    # The estimate counts images by Anthropic's rule: ceil(w * h / 750).
    assert response.report.image_tokens == 1 + 1590


def test_bad_parts_are_named(api: Stubs) -> None:
    with pytest.raises(grpc.RpcError) as caught:
        api.context.BuildMessages(
            pb.BuildMessagesRequest(
                history=[
                    pb.Message(role=pb.ROLE_USER, content="hi"),
                    pb.Message(role=pb.ROLE_ASSISTANT, content="hello"),
                    pb.Message(role=pb.ROLE_ASSISTANT, parts=[text_part("x")]),
                    pb.Message(
                        role=pb.ROLE_USER,
                        content="both",
                        parts=[
                            text_part("a"),
                            pb.ContentPart(
                                image=pb.ImagePart(data=images.gif(), media_type="image/png")
                            ),
                            url_part("http://example.com/a.png"),
                            pb.ContentPart(image=pb.ImagePart(data=b"", media_type="image/png")),
                        ],
                    ),
                ],
                user_message="text",
                user_message_parts=[url_part("data:image/png;base64,AAAA")],
                token_budget=1000,
            )
        )
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert sorted(violations(caught.value)) == sorted(
        [
            "history[2].parts",
            "history[3].content",
            "history[3].parts[1].image.data",
            "history[3].parts[2].image.url",
            "history[3].parts[3].image.data",
            "user_message_parts",
            "user_message_parts[0].image.url",
        ]
    )


def test_stored_parts_round_trip_and_session_build(api: Stubs) -> None:
    user = f"user-{uuid.uuid4().hex[:8]}"
    session = api.sessions.CreateSession(spb.CreateSessionRequest(user_id=user)).session
    api.sessions.AppendMessages(
        spb.AppendMessagesRequest(
            user_id=user,
            session_id=session.id,
            messages=[
                pb.Message(role=pb.ROLE_USER, parts=[text_part("Look:"), png_part()]),
                pb.Message(role=pb.ROLE_ASSISTANT, content="Seen."),
            ],
        )
    )
    listed = api.sessions.ListMessages(
        spb.ListMessagesRequest(user_id=user, session_id=session.id)
    ).messages
    first = listed[0].message
    assert first.content == ""
    assert first.parts[0].text == "Look:"
    assert first.parts[1].image.data == PNG and first.parts[1].image.media_type == "image/png"
    assert (first.parts[1].image.width, first.parts[1].image.height) == (2, 2)
    assert first.tokens == 3 + 2 + 255  # overhead, "Look:", one tile

    built = api.context.BuildMessages(
        pb.BuildMessagesRequest(
            session=pb.SessionContext(user_id=user, session_id=session.id),
            user_message_parts=[url_part(width=512, height=512)],
            token_budget=4000,
            output_format=pb.OUTPUT_FORMAT_OPENAI,
        )
    )
    window = [m for m in built.messages if m.role != pb.ROLE_SYSTEM]
    assert window[0].parts[1].image.data == PNG
    assert window[-1].parts[0].image.url == "https://example.com/cat.png"
    assert built.report.image_tokens == 255 + 255
    payload = json.loads(built.payload_json)["messages"]
    assert payload[1]["content"][1]["image_url"]["url"].startswith("data:image/png;base64,")


def test_echo_describes_the_parts_and_the_log_never_holds_bytes(api: Stubs) -> None:
    user = f"user-{uuid.uuid4().hex[:8]}"
    events = list(
        api.chat.StreamChat(
            cpb.StreamChatRequest(
                session=pb.SessionContext(user_id=user),
                user_message_parts=[text_part("What is it?"), png_part()],
            )
        )
    )
    done = events[-1].turn_completed
    assert done.status == cpb.TURN_STATUS_OK
    assert "What is it?\n[image image/png 2x2, 68 bytes]" in done.final_text
    assert len(PNG) == 68
    sid = events[0].turn_started.session_id
    stored = api.sessions.ListMessages(spb.ListMessagesRequest(user_id=user, session_id=sid))
    assert stored.messages[0].message.parts[1].image.data == PNG
    lines = [
        json.loads(e.json)
        for e in api.sessions.ExportEvents(spb.ExportEventsRequest(user_id=user, session_id=sid))
    ]
    start = next(e for e in lines if e["type"] == "turn_start")
    assert start["content"] == "What is it?\n[image: image/png 2x2]"
    assert not any(PNG_B64[:16] in json.dumps(e) for e in lines)


def test_count_tokens_counts_images(api: Stubs) -> None:
    counted = api.context.CountTokens(
        pb.CountTokensRequest(
            tokenizer="cl100k_base",
            messages=[pb.Message(role=pb.ROLE_USER, parts=[url_part(width=2048, height=4096)])],
        )
    )
    assert list(counted.message_tokens) == [3 + 1105]  # OpenAI's 2048x4096 example
