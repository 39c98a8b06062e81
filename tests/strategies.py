"""The hypothesis strategies the tests share: one place, so the codecs' tests draw the same kinds of input.

- SpanData as any encoder must take it (``spans``: any ids, lone-surrogate-free text, every AnyValue kind, NaN
  and infinities, nested lists and maps) and values that are equal but of different types (``tricky_values``).
- SpanData that OTLP/JSON round-trips (``json_spans``: nonzero ids, finite floats, ``None`` among the values).
- OTLP/JSON attribute objects as text, with the escapes and key orders a reader meets (``attr_text_objects``).
- ``span_strategy``: the one shape of a SpanData strategy (every field a codec writes), from the parts a test
  wants to stress; ``spans``, ``json_spans`` and the compiled codecs' tests are made with it.
"""

from __future__ import annotations

import string
from typing import Any

from hypothesis import strategies as st

from launchtrace.spans import SpanData, SpanEvent, SpanLink

ids16 = st.binary(min_size=16, max_size=16)
ids8 = st.binary(min_size=8, max_size=8)
u32 = st.integers(min_value=0, max_value=(1 << 32) - 1)
u64 = st.integers(min_value=0, max_value=(1 << 64) - 1)


def span_strategy(
    *,
    text: st.SearchStrategy,
    attributes: st.SearchStrategy,
    resources: st.SearchStrategy,
    ids16: st.SearchStrategy = ids16,
    ids8: st.SearchStrategy = ids8,
    u32: st.SearchStrategy = u32,
    u64: st.SearchStrategy = u64,
    counts: st.SearchStrategy = u32,
    events: st.SearchStrategy | None = None,
    links: st.SearchStrategy | None = None,
    **fields: st.SearchStrategy,
) -> st.SearchStrategy[SpanData]:
    """SpanData with every field a codec writes, drawn from these parts; ``fields`` replaces any field's
    strategy (``kind=st.integers(0, 300)``). ``events`` / ``links``: the strategy of one event / link (default:
    built from the same parts)."""
    if events is None:
        events = st.builds(SpanEvent, name=text, time_ns=u64, attributes=attributes, dropped_attributes_count=counts)
    if links is None:
        links = st.builds(
            SpanLink,
            trace_id=ids16,
            span_id=ids8,
            attributes=attributes,
            trace_state=text,
            flags=u32,
            dropped_attributes_count=counts,
        )
    parts: dict[str, Any] = dict(
        trace_id=ids16,
        span_id=ids8,
        parent_span_id=st.one_of(st.none(), ids8),
        name=text,
        start_ns=u64,
        end_ns=u64,
        attributes=attributes,
        kind=st.integers(min_value=0, max_value=5),
        status_code=st.integers(min_value=0, max_value=2),
        status_message=text,
        events=st.lists(events, max_size=2).map(tuple),
        links=st.lists(links, max_size=2).map(tuple),
        trace_state=text,
        flags=u32,
        dropped_attributes_count=counts,
        dropped_events_count=counts,
        dropped_links_count=counts,
        resource=resources,
        resource_schema_url=st.sampled_from(["", "https://opentelemetry.io/schemas/1.24.0"]),
        scope_name=st.sampled_from(["", "launchtrace", "other"]),
        scope_version=st.sampled_from(["", "0.1.0"]),
        scope_attributes=st.sampled_from([(), (("a", 1),)]),
        schema_url=st.sampled_from(["", "s"]),
    )
    parts.update(fields)
    return st.builds(SpanData, **parts)


# ----------------------------------------------------------------------- SpanData, as any encoder takes it
text = st.text(st.characters(exclude_categories=("Cs",)), max_size=12)
keys = st.text(string.ascii_letters + ".é_", min_size=1, max_size=8)
scalars = st.one_of(
    text,
    st.booleans(),
    st.integers(min_value=-(1 << 63), max_value=(1 << 63) - 1),
    st.integers(min_value=-(1 << 70), max_value=1 << 70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.binary(max_size=10),
    st.sampled_from([0, 0.0, -0.0, "", b"", False, 1, 1.0, True]),
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=3).map(tuple), st.dictionaries(keys, inner, max_size=3)),
    max_leaves=6,
)
attributes = st.dictionaries(keys, values, max_size=6).map(lambda d: tuple(d.items()))
small = st.integers(min_value=0, max_value=1000)

resources = st.sampled_from(
    [(), (("service.name", "svc"),), (("service.name", "other"), ("host", "h1")), (("k", {"a": (1, 2)}),)]
)
spans = span_strategy(text=text, attributes=attributes, resources=resources, counts=small)

tricky_values = st.sampled_from(
    [0, 1, True, False, 1.0, 0.0, -0.0, float("nan"), "1", "", b"1", (1,), (True,), (1.0,), ((1,),)]
)

# --------------------------------------------------------------------- SpanData, as OTLP/JSON round-trips it
json_ids16 = st.binary(min_size=16, max_size=16).filter(any)
json_ids8 = st.binary(min_size=8, max_size=8).filter(any)
json_u64 = st.integers(min_value=0, max_value=2**64 - 1)
json_u32 = st.integers(min_value=0, max_value=2**32 - 1)
json_text = st.text(max_size=12)
json_scalars = (
    json_text
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**63 - 1)
    | st.floats(allow_nan=False)
    | st.binary(max_size=8)
    | st.none()
)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=3).map(tuple) | st.dictionaries(json_text, inner, max_size=3),
    max_leaves=8,
)
json_attrs = st.dictionaries(json_text, json_values, max_size=4).map(lambda d: tuple(d.items()))
json_events = st.builds(SpanEvent, json_text, json_u64, json_attrs, json_u32)
json_resources = st.sampled_from([(), (("service.name", "sim"),), (("service.name", "other"), ("host", "a"))])
json_spans = span_strategy(
    text=json_text,
    attributes=json_attrs,
    resources=json_resources,
    ids16=json_ids16,
    ids8=json_ids8,
    resource_schema_url=st.sampled_from(["", "https://opentelemetry.io/schemas/1.4.0"]),
    scope_name=st.sampled_from(["", "launchtrace"]),
    scope_version=st.sampled_from(["", "0.1"]),
)

# -------------------------------------------------------------------------- OTLP/JSON attribute objects, as text
_attr_tricky = st.sampled_from(
    ['},{"key":', '"}', ':"', "\\", '\\"', "é", "\u2028", "\x00", "\ud7ff", "ﬀ", "0", "12", "-3", " 7", "1e3"]
)
attr_text_strings = st.text(max_size=6) | _attr_tricky | st.lists(_attr_tricky, max_size=3).map("".join)
_attr_text_scalars = st.one_of(
    st.builds(lambda s: {"stringValue": s}, attr_text_strings),
    st.builds(lambda s: {"intValue": s}, st.from_regex(r"-?[0-9]{1,25}", fullmatch=True) | attr_text_strings),
    st.builds(lambda i: {"intValue": i}, st.integers(-(2**63), 2**64 - 1)),
    st.builds(lambda b: {"boolValue": b}, st.booleans() | attr_text_strings),
    st.builds(lambda f: {"doubleValue": f}, st.floats() | st.sampled_from(["NaN", "Infinity", "-Infinity", "x"])),
    st.builds(lambda s: {"bytesValue": s}, st.sampled_from(["AQI=", "AQI", "-_8", "!!", ""])),
    st.just({}),
)
attr_text_values = st.recursive(
    _attr_text_scalars,
    lambda inner: (
        st.builds(lambda vs: {"arrayValue": {"values": vs}}, st.lists(inner, max_size=3))
        | st.builds(
            lambda kvs: {"kvlistValue": {"values": [{"key": k, "value": v} for k, v in kvs]}},
            st.lists(st.tuples(attr_text_strings, inner), max_size=3),
        )
    ),
    max_leaves=6,
)
attr_text_objects = st.one_of(
    st.builds(lambda k, v: {"key": k, "value": v}, attr_text_strings, attr_text_values),
    st.builds(lambda k, v: {"value": v, "key": k}, attr_text_strings, attr_text_values),  # another key order
    st.builds(lambda k, v: {"key": k, "value": v, "x": [{"key": 1}, {"key": 2}]}, attr_text_strings, attr_text_values),
    st.builds(lambda k: {"key": k}, attr_text_strings),
    st.builds(lambda k, v: {"key": k, "value": v, "value2": {"key": 3}}, attr_text_strings, attr_text_values),
    st.just({"key": 5, "value": {"stringValue": "x"}}),
    st.just([]),
)
