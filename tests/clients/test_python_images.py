"""The Python SDK sends image parts (sync and async): the helper, messages, user messages."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from contextd_client import AsyncContextClient, ContextClient, TurnCompleted, image_part

from tests.support import images
from tests.support.sdk import expect_error

PNG = images.png(2, 2)


def test_image_part_from_bytes_path_and_url(tmp_path: Path) -> None:
    assert image_part(data=PNG) == {"image": {"data": PNG, "media_type": "image/png"}}
    path = tmp_path / "a.gif"
    path.write_bytes(images.gif())
    assert image_part(path=path, detail="low")["image"] == {
        "data": images.gif(),
        "media_type": "image/gif",
        "detail": "low",
    }
    assert image_part(url="https://example.com/a.png", width=10, height=20) == {
        "image": {"url": "https://example.com/a.png", "width": 10, "height": 20}
    }
    with pytest.raises(TypeError):
        image_part(data=PNG, url="https://example.com/a.png")
    with pytest.raises(ValueError):
        image_part(data=PNG, detail="huge")


def test_build_messages_with_parts_both_ways(client: ContextClient) -> None:
    result = client.build_messages(
        ["Describe:", image_part(data=PNG)],
        history=[
            {"role": "user", "content": [image_part(url="https://example.com/a.png")]},
            {"role": "assistant", "content": "A cat."},
        ],
        token_budget=5000,
        output_format="openai",
    )
    assert result.report.image_tokens == 765 + 255
    first, user = result.messages[0], result.messages[2]
    assert first["parts"] == [{"image": {"url": "https://example.com/a.png", "detail": "auto"}}]
    assert user["content"] == ""
    assert user["parts"][0] == {"text": "Describe:"}
    assert user["parts"][1]["image"]["data"] == PNG
    assert result.payload is not None
    assert result.payload["messages"][2]["content"][1]["type"] == "image_url"
    # Messages read back feed back in unchanged.
    again = client.build_messages("ok", history=result.messages, token_budget=5000)
    assert again.messages[0]["parts"] == first["parts"]


def test_bad_parts_are_left_to_the_server(client: ContextClient) -> None:
    error = expect_error(
        lambda: client.build_messages([image_part(data=b"not an image")], token_budget=100)
    )
    assert error.fields == [
        "user_message_parts[0].image.media_type",
        "user_message_parts[0].image.data",
    ]


def test_stored_parts_come_back(client: ContextClient) -> None:
    user = f"u-{uuid.uuid4().hex[:8]}"
    session = client.create_session(user)
    client.append_messages(
        user, session["id"], [{"role": "user", "content": ["Look", image_part(data=PNG)]}]
    )
    [stored] = client.list_messages(user, session["id"])
    assert stored["parts"][1]["image"]["width"] == 2


async def test_async_stream_chat_with_an_image(aclient: AsyncContextClient) -> None:
    user = f"u-{uuid.uuid4().hex[:8]}"
    events = [e async for e in aclient.stream_chat(["Hi", image_part(data=PNG)], user_id=user)]
    done = events[-1]
    assert isinstance(done, TurnCompleted) and done.status == "ok"
    assert "[image image/png 2x2, 68 bytes]" in done.final_text
