"""The receipt codec: round trips, and nothing it did not sign gets through."""

from __future__ import annotations

import base64

import pytest
from hypothesis import given
from hypothesis import strategies as st

from half_store.domain.share_receipts import MalformedReceipt, Receipt, ReceiptCodec

SECRET = b"0123456789abcdef0123456789abcdef"
codec = ReceiptCodec(SECRET)

receipts = st.builds(
    Receipt,
    st.from_regex(r"[A-Za-z0-9._-]{1,245}", fullmatch=True),
    st.integers(0, 2**31 - 1),
    st.integers(0, 2**31 - 1),
    st.integers(0, 2**63 - 1),
    st.integers(0, 2**31 - 1),
    st.integers(0, 2**63 - 1),
)


@given(receipts)
def test_round_trip(receipt: Receipt) -> None:
    text = codec.encode(receipt)
    assert codec.decode(text) == receipt
    assert text.isascii() and "=" not in text and "/" not in text and "+" not in text


def test_a_receipt_is_short() -> None:
    assert len(codec.encode(Receipt("orders", 12, 3, 1_000_000, 1, 1))) < 80


@given(receipts, st.integers(0, 10_000), st.integers(1, 255))
def test_a_changed_byte_is_refused(receipt: Receipt, position: int, flip: int) -> None:
    raw = bytearray(base64.urlsafe_b64decode(codec.encode(receipt) + "=="))
    raw[position % len(raw)] ^= flip
    with pytest.raises(MalformedReceipt):
        codec.decode(base64.urlsafe_b64encode(bytes(raw)).rstrip(b"=").decode())


def test_another_secret_does_not_accept_it() -> None:
    text = codec.encode(Receipt("g", 1, 0, 5, 1, 1))
    with pytest.raises(MalformedReceipt):
        ReceiptCodec(b"another secret, also long enough").decode(text)


def test_one_receipt_cannot_be_turned_into_another_messages() -> None:
    """The offset is under the MAC: re-encoding the body with another offset needs the secret."""
    text = codec.encode(Receipt("g", 1, 0, 5, 1, 1))
    forged = ReceiptCodec(b"the forger's own secret, 32 byte").encode(Receipt("g", 1, 0, 6, 1, 1))
    assert codec.decode(text).offset == 5
    with pytest.raises(MalformedReceipt):
        codec.decode(forged)


@pytest.mark.parametrize("text", ["", "bogus", "!!!!", "A" * 10, "A" * 100_000, "é", "AQ", "\x00"])
def test_malformed_text_is_refused(text: str) -> None:
    with pytest.raises(MalformedReceipt):
        codec.decode(text)


def test_a_short_secret_is_refused() -> None:
    with pytest.raises(ValueError):
        ReceiptCodec(b"short")
