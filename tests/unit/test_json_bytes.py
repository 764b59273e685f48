"""Values are kept as JSON text until their group commit: it must not carry orjson's spare buffer."""

from __future__ import annotations

import tracemalloc

import orjson
import pytest

from half_store.domain.json_bytes import stored_json


def test_stored_json_is_orjsons_text() -> None:
    value = {"order": 7, "note": "é" * 500}
    assert stored_json(value) == orjson.dumps(value)


def test_a_kept_value_holds_about_its_own_size() -> None:
    value = "v" * 1022  # 1 KiB of JSON text, the benchmarks' message
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        kept = [stored_json(value) for _ in range(200)]
        per_value = (tracemalloc.get_traced_memory()[0] - before) / len(kept)
    finally:
        tracemalloc.stop()
    assert per_value < 2 * 1024, f"{per_value:.0f} bytes held per 1 KiB value"


def test_stored_json_refuses_what_orjson_refuses() -> None:
    with pytest.raises(TypeError):
        stored_json(2**70)
