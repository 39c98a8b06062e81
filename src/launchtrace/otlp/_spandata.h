/* launchtrace.spans.SpanData, SpanEvent and SpanLink as the compiled OTLP codecs see them: one list of their
 * fields, in one order, for the JSON Lines reader (_jsonread.c, which makes SpanData) and the JSON Lines and
 * protobuf encoders (_jsonenc.c, _protoenc.c, which read them by slot offset). Each module finds the offsets
 * by these names when it starts, so a field renamed in spans.py fails there, loudly, not silently here.
 *
 * SpanData's fields come in two runs: those of the OTLP Span message, then those that group spans into
 * ResourceSpans and ScopeSpans. */
#ifndef LAUNCHTRACE_SPANDATA_H
#define LAUNCHTRACE_SPANDATA_H

enum {
    F_TRACE_ID,
    F_SPAN_ID,
    F_PARENT,
    F_NAME,
    F_START,
    F_END,
    F_ATTRS,
    F_KIND,
    F_STATUS_CODE,
    F_STATUS_MSG,
    F_EVENTS,
    F_LINKS,
    F_TRACE_STATE,
    F_FLAGS,
    F_DROPPED_ATTRS,
    F_DROPPED_EVENTS,
    F_DROPPED_LINKS,
    N_SPAN_MESSAGE_FIELDS, /* the fields of the Span message; the grouping fields follow */
    F_RESOURCE = N_SPAN_MESSAGE_FIELDS,
    F_RESOURCE_SCHEMA,
    F_SCOPE_NAME,
    F_SCOPE_VERSION,
    F_SCOPE_ATTRS,
    F_SCHEMA_URL,
    N_SPANDATA_FIELDS
};
static const char *const SPANDATA_FIELDS[N_SPANDATA_FIELDS] = {
    "trace_id", "span_id", "parent_span_id", "name", "start_ns", "end_ns", "attributes", "kind", "status_code",
    "status_message", "events", "links", "trace_state", "flags", "dropped_attributes_count",
    "dropped_events_count", "dropped_links_count", "resource", "resource_schema_url", "scope_name",
    "scope_version", "scope_attributes", "schema_url",
};

enum { E_NAME, E_TIME, E_ATTRS, E_DROPPED, N_EVENT_FIELDS };
static const char *const EVENT_FIELDS[N_EVENT_FIELDS] = {"name", "time_ns", "attributes", "dropped_attributes_count"};

enum { L_TRACE_ID, L_SPAN_ID, L_ATTRS, L_TRACE_STATE, L_FLAGS, L_DROPPED, N_LINK_FIELDS };
static const char *const LINK_FIELDS[N_LINK_FIELDS] = {"trace_id", "span_id", "attributes", "trace_state", "flags",
                                                       "dropped_attributes_count"};

#endif
