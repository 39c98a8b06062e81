"""The HTTP client against a real server on loopback: retries, Retry-After, auth, headers, TLS, failures.

No Jaeger or Tempo can run here; ``loopback_http.Backend`` is a real ``http.server`` in a thread. Waits between
retries go through a recording ``sleep`` so the tests do not wait for real.
"""

from __future__ import annotations

import logging

import pytest

from launchtrace.errors import UserError
from launchtrace.sources.http import HttpClient, HttpOptions
from loopback_http import Answer, Backend, free_port

TOKEN = "s3cr3t-token-value"


def client(url: str, sleeps: list[float] | None = None, **kw) -> HttpClient:
    record = sleeps.append if sleeps is not None else (lambda s: None)
    return HttpClient(HttpOptions(url, **kw), sleep=record)


def test_retries_5xx_and_429_with_backoff_and_retry_after():
    sleeps: list[float] = []
    with Backend() as b:
        b.routes["/x"] = [
            Answer(503, b"busy"),
            Answer(429, b"slow down", headers=(("Retry-After", "7"),)),
            Answer(502, b""),
            Answer(200, b'{"ok":true}'),
        ]
        answer = client(b.url, sleeps, retries=3, backoff=0.25).get("/x")
    assert answer.status == 200 and answer.json() == {"ok": True}
    assert sleeps == [0.25, 7.0, 1.0], "exponential backoff, Retry-After honoured when given"
    assert len(b.seen) == 4


def test_retry_after_is_capped_and_exhausted_retries_name_the_url():
    sleeps: list[float] = []
    with Backend() as b:
        b.routes["/x"] = Answer(503, b"upstream overloaded", headers=(("Retry-After", "3600"),))
        with pytest.raises(UserError) as err:
            client(b.url, sleeps, retries=2, max_backoff=5).get("/x")
    assert str(err.value) == f"{b.url}/x: HTTP 503 after 3 tries: 'upstream overloaded'"
    assert sleeps == [5, 5]


def test_other_statuses_are_not_retried_and_auth_failures_say_what_to_check():
    with Backend() as b:
        b.routes["/x"] = Answer(401, b"unauthorized")
        with pytest.raises(UserError, match=r"/x: HTTP 401 \(check --token, --basic-auth or --header\)"):
            client(b.url, retries=3).get("/x")
    assert len(b.seen) == 1


def test_bearer_token_basic_auth_and_extra_headers_are_sent_but_never_shown(caplog):
    caplog.set_level(logging.DEBUG, logger="launchtrace")
    with Backend() as b:
        b.routes["/x"] = Answer(500, b"boom")
        c = client(b.url, token=TOKEN, headers=(("X-Scope-OrgID", "team-a"),), retries=1)
        with pytest.raises(UserError) as err:
            c.get("/x")
        basic = client(b.url.replace("http://", "http://alice:pw-in-url@"), retries=0)
        b.routes["/y"] = Answer(200, b"{}")
        basic.get("/y")
    assert b.seen[0].headers["authorization"] == f"Bearer {TOKEN}"
    assert b.seen[0].headers["x-scope-orgid"] == "team-a"
    assert b.seen[-1].headers["authorization"].startswith("Basic ")  # user info moved into basic auth
    shown = str(err.value) + repr(c) + repr(c.options) + repr(basic) + caplog.text
    assert TOKEN not in shown and "pw-in-url" not in shown and "alice" not in shown
    assert any("GET " in r.getMessage() for r in caplog.records), "requests are logged, without secrets"


def test_garbage_answer_is_a_user_error_naming_the_url():
    with Backend() as b:
        b.routes["/api/search"] = Answer(200, b"<html>proxy login</html>", "text/html")
        with pytest.raises(UserError) as err:
            client(b.url).get("/api/search").json()
    assert str(err.value).startswith(f"{b.url}/api/search: answer is not JSON (")
    assert str(err.value).endswith("'<html>proxy login</html>'")


def test_down_and_slow_backends():
    port = free_port()
    sleeps: list[float] = []
    with pytest.raises(UserError) as err:
        client(f"http://127.0.0.1:{port}", sleeps, retries=2).get("/api/v3/traces/ab")
    assert str(err.value).startswith(f"http://127.0.0.1:{port}/api/v3/traces/ab: cannot connect (")
    assert str(err.value).endswith("(tried 3 times)") and len(sleeps) == 2
    with Backend() as b:
        b.routes["/slow"] = Answer(200, b"{}", delay=1.0)
        with pytest.raises(UserError, match=r"/slow: no complete answer within 0.2 s \(tried once\)"):
            client(b.url, timeout=0.2, retries=0).get("/slow")


def test_bad_options_are_user_errors():
    with pytest.raises(UserError, match="must be http:// or https://"):
        HttpOptions("ftp://x")
    with pytest.raises(UserError, match="must be http:// or https://"):
        HttpOptions("jaeger:16686")
    with pytest.raises(UserError, match="timeout must be positive"):
        HttpOptions("http://x", timeout=0)


def test_tls_verification_ca_file_and_insecure(tmp_path):
    with Backend(tls_dir=tmp_path) as b:
        b.routes["/x"] = Answer(200, b'{"tls":1}')
        with pytest.raises(UserError, match=r"/x: TLS failed \(.*\); see --ca-file or --insecure"):
            client(b.url, retries=0).get("/x")
        assert client(b.url, ca_file=str(b.cert_file)).get("/x").json() == {"tls": 1}
        assert client(b.url, verify=False).get("/x").json() == {"tls": 1}
