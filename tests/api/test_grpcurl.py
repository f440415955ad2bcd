"""grpcurl against a live server: reflection, health and every RPC with JSON.

grpcurl accepts camelCase or proto field names on input and prints proto names.
"""

from __future__ import annotations

import json

from tests.support import grpcurl, scenarios

SERVICE = "contextd.v1.ContextService"


def test_reflection_lists_services(address: str) -> None:
    result = grpcurl.run(address, "list")
    assert result.returncode == 0, result.stderr
    assert set(result.stdout.split()) >= {
        SERVICE,
        "grpc.health.v1.Health",
        "grpc.reflection.v1alpha.ServerReflection",
    }


def test_reflection_describes_service(address: str) -> None:
    result = grpcurl.run(address, "describe", SERVICE)
    assert result.returncode == 0, result.stderr
    for rpc in ("AssemblePrompt", "BuildMessages", "CountTokens", "ListTokenizers"):
        assert f"rpc {rpc}" in result.stdout


def test_health_serving(address: str) -> None:
    assert grpcurl.call(address, "grpc.health.v1.Health/Check") == {"status": "SERVING"}
    overall = grpcurl.call(address, "grpc.health.v1.Health/Check", {"service": SERVICE})
    assert overall == {"status": "SERVING"}


def test_assemble_prompt(address: str) -> None:
    out = grpcurl.call(address, f"{SERVICE}/AssemblePrompt", {"layers": scenarios.LAYERS_ALL})
    scenarios.check_prompt_all_layers(out["system_prompt"])
    assert [layer["name"] for layer in out["layers"]] == list(scenarios.LAYERS_ALL)


def test_build_messages_trims_the_oldest_first(address: str) -> None:
    out = grpcurl.call(
        address,
        f"{SERVICE}/BuildMessages",
        {
            "systemPrompts": ["S"],
            "history": [
                {"role": "ROLE_USER", "content": "AAAA"},
                {"role": "ROLE_ASSISTANT", "content": "BBBB"},
                {"role": "ROLE_USER", "content": "CCCC"},
                {"role": "ROLE_ASSISTANT", "content": "DDDD"},
            ],
            "userMessage": "E",
            "tokenBudget": 4,
            "tokenizer": "estimate",
            "outputFormat": "OUTPUT_FORMAT_OPENAI",
        },
    )
    assert [m["content"] for m in out["messages"]] == ["S", "CCCC", "DDDD", "E"]
    assert json.loads(out["payload_json"])["messages"][-1] == {"role": "user", "content": "E"}
    assert out["report"]["dropped"] == [{"count": 2, "reason": "DROP_REASON_BUDGET"}]


def test_count_tokens(address: str) -> None:
    out = grpcurl.call(
        address,
        f"{SERVICE}/CountTokens",
        {"tokenizer": "estimate", "texts": ["abcde", "你好"]},
    )
    assert out == {"tokenizer": "estimate", "text_tokens": [2, 2], "total_tokens": 4}


def test_list_tokenizers(address: str) -> None:
    out = grpcurl.call(address, f"{SERVICE}/ListTokenizers")
    by_name = {t["name"]: t for t in out["tokenizers"]}
    assert by_name["cl100k_base"]["available"] is True
    assert by_name["estimate"]["available"] is True
    assert out["default_tokenizer"] == "cl100k_base"


def test_bad_request_names_field(address: str) -> None:
    result = grpcurl.run(
        address, f"{SERVICE}/BuildMessages", data={"userMessage": "hi", "tokenBudget": -1}
    )
    assert result.returncode != 0
    assert "InvalidArgument" in result.stderr
    assert "token_budget" in result.stderr
