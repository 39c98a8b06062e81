"""The search and connection options of ``launchtrace pull``, which ``baseline build`` and ``alert`` take too.

Their own module so that the fleet commands define these options without importing ``pull`` itself (its
writer and its backends' clients are imported by ``pull``, and by the fleet commands only for a backend).
"""

from __future__ import annotations

import argparse

__all__ = ["BASIC_AUTH_ENV", "TOKEN_ENV", "add_query_arguments"]

TOKEN_ENV = "LAUNCHTRACE_TOKEN"
BASIC_AUTH_ENV = "LAUNCHTRACE_BASIC_AUTH"


def add_query_arguments(parser: argparse.ArgumentParser, title: str = "what to pull") -> None:
    """The search and connection options (also used by ``baseline build``, ``alert`` and the analyzers)."""
    what = parser.add_argument_group(title)
    what.add_argument("--trace-id", action="append", default=[], help="a trace id (hex or base64); repeatable")
    what.add_argument("--service", default="", help="search: service name")
    what.add_argument("--operation", default="", help="search: span name")
    what.add_argument("--query", default="", help="Tempo: a TraceQL query (default: built from --service etc.)")
    what.add_argument("--attribute", action="append", default=[], metavar="K=V", help="search: attribute match")
    what.add_argument("--since", help="search window start: now, 15m, 2h, 1d, unix seconds, RFC 3339")
    what.add_argument("--until", help="search window end (default now)")
    what.add_argument("--limit", type=int, default=20, help="search: most traces (default 20)")
    what.add_argument("--api", help="Jaeger: v3 (default) or classic; Tempo: v2 (default) or v1")
    what.add_argument("--protobuf", action="store_true", help="Tempo v1: ask for protobuf instead of JSON")
    conn = parser.add_argument_group("connection")
    conn.add_argument("--token", help=f"bearer token (or ${TOKEN_ENV})")
    conn.add_argument("--basic-auth", metavar="USER:PASSWORD", help=f"basic auth (or ${BASIC_AUTH_ENV})")
    conn.add_argument("--header", action="append", default=[], metavar="K=V", help="extra header; repeatable")
    conn.add_argument("--ca-file", help="verify TLS against this CA bundle")
    conn.add_argument("--insecure", action="store_true", help="do not verify TLS certificates")
    conn.add_argument("--timeout", type=float, default=10.0, help="seconds each request may take in all (default 10)")
    conn.add_argument(
        "--max-answer-bytes",
        default="64M",
        metavar="SIZE",
        help="largest answer body after inflation: bytes, or 512k, 64M, 1G (default 64M)",
    )
    conn.add_argument("--retries", type=int, default=3, help="retries on 429/5xx/no connection (default 3)")
