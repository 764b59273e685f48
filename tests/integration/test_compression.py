"""Answers are gzipped for a client that asks, once they are long enough to gain from it (HALFMQ_GZIP_MIN_BYTES)."""

from __future__ import annotations

import gzip
import json

from fastapi.testclient import TestClient

from tests.integration.conftest import create_topic

GZIP = {"accept-encoding": "gzip"}
PLAIN = {"accept-encoding": "identity"}


def test_a_long_answer_is_gzipped_when_asked_and_a_short_one_never(client: TestClient) -> None:
    create_topic(client, "t")
    messages = [{"key": f"k-{n}", "value": {"order": n, "note": "the same words again"}} for n in range(200)]
    produced = client.post("/v1/topics/t/messages", json={"messages": messages[:1]}, headers=GZIP)
    assert produced.status_code == 200 and "content-encoding" not in produced.headers  # short: as it is
    assert client.post("/v1/topics/t/messages", json={"messages": messages[1:]}).status_code == 200

    fetch = "/v1/topics/t/partitions/0/messages"
    plain = client.get(fetch, headers=PLAIN)
    assert "content-encoding" not in plain.headers
    with client.stream("GET", fetch, headers=GZIP) as packed:
        assert packed.headers["content-encoding"] == "gzip"
        raw = b"".join(packed.iter_raw())
    assert len(raw) * 5 < len(plain.content)  # JSON of messages shrinks a lot
    assert json.loads(gzip.decompress(raw)) == plain.json()
    assert len(plain.json()["messages"]) == 200
