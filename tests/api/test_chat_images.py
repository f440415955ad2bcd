"""StreamChat with image parts: the exact shapes the fake OpenAI and Anthropic servers get."""

from __future__ import annotations

import base64

from contextd.v1 import chat_pb2 as cpb
from contextd.v1 import context_pb2 as pb

from tests.support import images
from tests.support.chat_live import Live, completed, new_user, request, run_turn, stored
from tests.support.fakes import anthropic_sse as an
from tests.support.fakes import openai_sse as oa

JPEG = images.jpeg(640, 480)
JPEG_B64 = base64.b64encode(JPEG).decode()


def image_turn(user: str, session_id: str = "") -> cpb.StreamChatRequest:
    req = request(user, "", session_id)
    req.user_message_parts.add(text="What is in these?")
    req.user_message_parts.add(image=pb.ImagePart(data=JPEG, media_type="image/jpeg"))
    req.user_message_parts.add(
        image=pb.ImagePart(url="https://example.com/b.webp", detail=pb.IMAGE_DETAIL_HIGH)
    )
    return req


async def test_openai_receives_image_url_parts(openai_live: Live) -> None:
    live, fake = openai_live, openai_live.fake
    user = new_user()
    n = len(fake.requests)
    fake.script(oa.text_reply(["Two images."]), oa.text_reply(["Still two."]))
    events = await run_turn(live, image_turn(user))
    assert completed(events).status == cpb.TURN_STATUS_OK
    started = events[0].turn_started
    # cl100k_base: 640x480 is 2x1 tiles (425); the URL image of unknown size counts 765.
    assert started.context.image_tokens == 425 + 765
    expected = {
        "role": "user",
        "content": [
            {"type": "text", "text": "What is in these?"},
            {"type": "image_url", "image_url": {"url": f"data:image/jpeg;base64,{JPEG_B64}"}},
            {
                "type": "image_url",
                "image_url": {"url": "https://example.com/b.webp", "detail": "high"},
            },
        ],
    }
    assert fake.bodies()[n]["messages"][-1] == expected
    # The next turn sends the stored message with its images again.
    sid = started.session_id
    await run_turn(live, request(user, "And now?", sid))
    assert fake.bodies()[n + 1]["messages"][-3] == expected
    rows = await stored(live, user, sid)
    assert rows[0].message.parts[1].image.data == JPEG


async def test_anthropic_receives_image_blocks(anthropic_live: Live) -> None:
    live, fake = anthropic_live, anthropic_live.fake
    n = len(fake.requests)
    fake.script(an.text_reply(["Two images."]))
    events = await run_turn(live, image_turn(new_user()))
    assert completed(events).status == cpb.TURN_STATUS_OK
    assert fake.bodies()[n]["messages"][-1] == {
        "role": "user",
        "content": [
            {"type": "text", "text": "What is in these?"},
            {
                "type": "image",
                "source": {"type": "base64", "media_type": "image/jpeg", "data": JPEG_B64},
            },
            {"type": "image", "source": {"type": "url", "url": "https://example.com/b.webp"}},
        ],
    }
