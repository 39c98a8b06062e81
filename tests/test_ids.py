"""Ids in every encoding backends use: hex any case, base64 (Tempo), short hex (Jaeger, Tempo search)."""

from __future__ import annotations

import base64

import pytest

from launchtrace.otlp.ids import (
    IdError,
    decode_id,
    padded_hex_trace_id,
    span_id_from_text,
    trace_id_from_text,
)

TRACE = bytes.fromhex("5b8efff798038103d269b633813fc700")
SPAN = bytes.fromhex("eee19b7ec3c1b100")


def test_hex_any_case_and_base64_give_the_same_bytes():
    assert trace_id_from_text(TRACE.hex()) == TRACE
    assert trace_id_from_text(TRACE.hex().upper()) == TRACE
    # the Tempo docs' base64 ids for the same trace and span
    assert trace_id_from_text("W47/95gDgQPSabYzgT/HAA==") == TRACE
    assert span_id_from_text("7uGbfsPBsQA=") == SPAN
    assert span_id_from_text(SPAN.hex()) == SPAN


def test_unpadded_and_urlsafe_base64_are_read():
    assert trace_id_from_text(base64.b64encode(TRACE).decode().rstrip("=")) == TRACE
    raw = bytes(range(0xF0, 0x100))  # has '+' and '/' in standard base64
    assert trace_id_from_text(base64.urlsafe_b64encode(raw).decode()) == raw


def test_hex_read_as_base64_is_rejected_not_accepted_as_24_bytes():
    hex_id = TRACE.hex()
    assert len(base64.b64decode(hex_id)) == 24  # the trap itself
    with pytest.raises(IdError, match=r"gives 24 bytes, expected 16 \(a hex id where base64 was expected\?\)"):
        trace_id_from_text(hex_id, encoding="base64")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "empty trace id"),
        ("5b8efff798038103d269b633813fc7", "neither hex nor base64|gives"),
        ("5b8efff798038103d269b633813fc70000", "read as base64 gives"),
        ("zz8efff798038103d269b633813fc700", "read as base64 gives 24 bytes"),
        ("0" * 32, "all zeros"),
        ("!!!!", "neither hex nor base64"),
    ],
)
def test_bad_trace_ids_raise_a_clear_error(text, message):
    with pytest.raises(IdError, match=message):
        trace_id_from_text(text)


def test_wrong_type_and_wrong_hex_length():
    with pytest.raises(IdError, match="must be a string, got int"):
        trace_id_from_text(12)  # type: ignore[arg-type]
    with pytest.raises(IdError, match="has 10 hex digits, expected 16"):
        decode_id("eee19b7ec3", 8, "hex")
    with pytest.raises(ValueError, match="encoding must be one of"):
        decode_id("eee19b7ec3c1b100", 8, "b32")


def test_padded_hex_trace_ids_from_jaeger_and_tempo_search():
    assert padded_hex_trace_id("0000000000000001") == bytes(15) + b"\x01"  # Jaeger classic 64-bit id
    assert padded_hex_trace_id("ff") == bytes(15) + b"\xff"  # Tempo search strips leading zeros
    assert padded_hex_trace_id(TRACE.hex()) == TRACE
    with pytest.raises(IdError, match="at most 32"):
        padded_hex_trace_id("1" * 33)
    with pytest.raises(IdError, match="not hex"):
        padded_hex_trace_id("W47/95gDgQPSabYzgT/HAA==")
    with pytest.raises(IdError, match="empty"):
        padded_hex_trace_id("")
