"""deploy/: every file parses, every image is pinned, the services agree on names, ports and endpoints, and every
metric and label a dashboard or alert rule names is one our pipeline really produces.

No container engine runs here, so the Collector, Jaeger, Tempo and Grafana are not started: their configs are
parsed and cross-checked (the "who talks to whom" graph below). Prometheus and Alertmanager are real: Debian's
``promtool`` and ``amtool`` check the shipped files, and ``promtool test rules`` runs the rules' unit tests.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest
import yaml
from tests import promql_names as P

from launchtrace import conventions as C

ROOT = Path(__file__).resolve().parent.parent
DEPLOY = ROOT / "deploy"
COMPOSE = DEPLOY / "compose"
K8S = DEPLOY / "k8s"
RULES = DEPLOY / "prometheus" / "launchtrace-rules.yaml"
RULES_TEST = ROOT / "tests" / "prometheus" / "launchtrace-rules-test.yaml"  # the fleet issue's unit tests
DASHBOARDS = sorted((COMPOSE / "grafana" / "dashboards").glob("*.json"))


def load(path: Path) -> dict:
    return yaml.safe_load(path.read_text())


def yaml_files() -> list[Path]:
    return sorted(p for p in DEPLOY.rglob("*") if p.suffix in (".yaml", ".yml"))


# --- every file parses ---------------------------------------------------------------------------------------


def test_every_yaml_and_json_file_parses():
    files = yaml_files()
    assert len(files) >= 12, files
    for path in files:
        docs = list(yaml.safe_load_all(path.read_text()))
        assert docs and all(isinstance(d, dict) for d in docs), path
    assert DASHBOARDS
    for path in sorted(DEPLOY.rglob("*.json")):
        assert isinstance(json.loads(path.read_text()), dict), path


# --- every image pinned --------------------------------------------------------------------------------------

_PINNED = re.compile(r"^[\w.\-/:]+:(?P<tag>[\w][\w.\-]*)$")


def _image_refs() -> list[tuple[str, str]]:
    """(where, image reference) for every image any deploy file names."""
    refs = []
    for name, svc in load(COMPOSE / "docker-compose.yaml")["services"].items():
        refs.append((f"compose {name}", svc.get("image", "")))
    for path in K8S.glob("*values.yaml"):
        values = load(path)
        image = values.get("image") or values.get("tempo", {}).get("image")
        refs.append((path.name, f"{image['repository']}:{image.get('tag', '')}"))
    for path in K8S.glob("*.yaml"):
        for doc in yaml.safe_load_all(path.read_text()):
            for container in _containers(doc):
                refs.append((f"{path.name} {container['name']}", container["image"]))
    for path in DEPLOY.rglob("Dockerfile"):
        for line in path.read_text().splitlines():
            if line.startswith("FROM "):
                refs.append((str(path.relative_to(DEPLOY)), line.split()[1]))
    return refs


def _containers(doc: object) -> list[dict]:
    if not isinstance(doc, dict):
        return []
    spec = doc.get("spec", {})
    pod = spec.get("jobTemplate", {}).get("spec", {}).get("template", {}).get("spec") or spec.get("template", {}).get(
        "spec", {}
    )
    return list(pod.get("containers", [])) + list(pod.get("initContainers", []))


def test_every_image_is_pinned():
    refs = _image_refs()
    where = {w for w, _ in refs}
    assert {"compose collector", "compose tempo", "compose grafana", "alert-cronjob.yaml alert"} <= where, where
    for place, ref in refs:
        m = _PINNED.match(ref)
        assert m, f"{place}: image {ref!r} has no tag"
        assert m["tag"] != "latest", f"{place}: image {ref!r} is not pinned"


def test_the_pin_check_rejects_latest_and_untagged():
    assert not _PINNED.match("grafana/tempo")
    assert _PINNED.match("grafana/tempo:latest")["tag"] == "latest"
    assert _PINNED.match("grafana/tempo:3.0.3")["tag"] == "3.0.3"


# --- Collector pipelines -------------------------------------------------------------------------------------

COLLECTOR_CONFIGS = {
    "compose": lambda: load(COMPOSE / "otel-collector.yaml"),
    "k8s gateway": lambda: load(K8S / "collector-gateway-values.yaml")["config"],
    "k8s agent": lambda: load(K8S / "collector-agent-values.yaml")["config"],
}


def _pipelines(config: dict) -> dict:
    return {k: v for k, v in config["service"]["pipelines"].items() if v is not None}


@pytest.mark.parametrize("name", sorted(COLLECTOR_CONFIGS))
def test_collector_pipelines_name_defined_components_memory_limiter_first_batch_last(name):
    config = COLLECTOR_CONFIGS[name]()
    defined = {
        kind: {k for k, v in (config.get(kind) or {}).items() if v is not None or kind == "connectors"}
        for kind in ("receivers", "processors", "exporters", "connectors")
    }
    for pipeline_name, pipeline in _pipelines(config).items():
        for r in pipeline["receivers"]:
            assert r in defined["receivers"] | defined["connectors"], (pipeline_name, r)
        for e in pipeline["exporters"]:
            assert e in defined["exporters"] | defined["connectors"], (pipeline_name, e)
        processors = pipeline["processors"]
        assert all(p in defined["processors"] for p in processors), (pipeline_name, processors)
        assert processors[0] == "memory_limiter", (name, pipeline_name)
        assert processors[-1] == "batch", (name, pipeline_name)


@pytest.mark.parametrize("name", ["compose", "k8s gateway"])
def test_span_metrics_see_every_span_before_tail_sampling(name):
    config = COLLECTOR_CONFIGS[name]()
    pipelines = _pipelines(config)
    feeding = [p for p in pipelines.values() if "span_metrics" in p["exporters"]]
    assert len(feeding) == 1
    (entry,) = feeding
    assert entry["receivers"] == ["otlp"], "span metrics must be computed on what arrives"
    assert "tail_sampling" not in entry["processors"]
    # the sampled traces continue through a forward connector into a pipeline that samples and exports
    (forward,) = [e for e in entry["exporters"] if e.startswith("forward")]
    (sampled,) = [p for p in pipelines.values() if forward in p["receivers"]]
    assert "tail_sampling" in sampled["processors"]
    # span metrics to one Prometheus exporter; launchtrace's own OTLP metrics to another, with the resource
    # attributes the rules group by (service.name, service.version, host.name) turned into labels
    (span_metrics,) = [p for p in pipelines.values() if "span_metrics" in p["receivers"]]
    assert all(e.split("/")[0] == "prometheus" for e in span_metrics["exporters"])
    (own,) = [p for n, p in pipelines.items() if n.startswith("metrics") and "otlp" in p["receivers"]]
    (exporter,) = own["exporters"]
    assert config["exporters"][exporter]["resource_to_telemetry_conversion"]["enabled"] is True
    kept = " ".join(
        st
        for p in own["processors"]
        if p.startswith("transform")
        for c in config["processors"][p]["metric_statements"]
        for st in c["statements"]
    )
    for attribute in ("service.name", "service.version", "host.name"):
        assert f'"{attribute}"' in kept
    policies = {p["type"] for p in config["processors"]["tail_sampling"]["policies"]}
    assert {"status_code", "latency", "probabilistic"} <= policies  # keep errors, slow steps; sample the rest


def test_span_metrics_dimensions_are_our_attribute_names_and_agree_across_deployments():
    compose = load(COMPOSE / "otel-collector.yaml")["connectors"]["span_metrics"]
    gateway = load(K8S / "collector-gateway-values.yaml")["config"]["connectors"]["span_metrics"]
    assert compose == gateway, "the dashboards and rules serve both deployments: same series"
    names = [d["name"] for d in compose["dimensions"]]
    ours = {C.KERNEL, C.OP, C.SCOPE_KIND, C.SCOPE_FINGERPRINT}
    assert ours <= set(names)
    assert {"service.version", "host.name"} <= set(names)  # OpenTelemetry resource attributes
    public = {getattr(C, n) for n in C.__all__ if isinstance(getattr(C, n), str)}
    assert set(names) - {"service.version", "host.name"} <= public
    # nothing of high cardinality (pointers, sequence numbers, dims, scalars, ids)
    assert not {C.SEQ, C.ARRAY_KEYS, C.DIM, C.SCOPE_ID, C.GRAPH_ID, C.THREAD_ID} & set(names)


def test_agents_route_every_span_of_a_trace_to_one_gateway():
    agent = load(K8S / "collector-agent-values.yaml")
    lb = agent["config"]["exporters"]["load_balancing"]
    assert lb["routing_key"] == "traceID"
    assert _pipelines(agent["config"])["traces"]["exporters"] == ["load_balancing"]
    assert "tail_sampling" not in (agent["config"].get("processors") or {})
    assert agent["mode"] == "daemonset"
    gateway = load(K8S / "collector-gateway-values.yaml")
    assert gateway["mode"] == "deployment" and gateway["replicaCount"] >= 2
    rules = agent["clusterRole"]["rules"]
    assert any("endpointslices" in r["resources"] or "endpoints" in r["resources"] for r in rules)


# --- who talks to whom: compose ------------------------------------------------------------------------------


def _port(endpoint: str) -> int:
    return int(str(endpoint).rsplit(":", 1)[1].split("/")[0])


def _host_port(url: str) -> tuple[str, int]:
    url = re.sub(r"^\w+://", "", str(url)).split("/")[0]
    host, _, port = url.partition(":")
    return host, int(port) if port else 80


def _collector_listens(config: dict) -> set[int]:
    ports = set()
    for protocol in config["receivers"]["otlp"]["protocols"].values():
        ports.add(_port(protocol["endpoint"]))
    for name, exporter in (config.get("exporters") or {}).items():
        if name.split("/")[0] == "prometheus":
            ports.add(_port(exporter["endpoint"]))
    for reader in config["service"].get("telemetry", {}).get("metrics", {}).get("readers", []):
        ports.add(reader["pull"]["exporter"]["prometheus"]["port"])
    for ext in (config.get("extensions") or {}).values():
        endpoint = (ext or {}).get("endpoint") or (ext or {}).get("http", {}).get("endpoint")
        if endpoint:
            ports.add(_port(endpoint))
    return ports


def _compose_listeners() -> dict[str, set[int]]:
    """Each compose service -> the ports its own config makes it listen on (not what compose publishes)."""
    collector = load(COMPOSE / "otel-collector.yaml")
    jaeger = load(COMPOSE / "jaeger.yaml")
    tempo = load(COMPOSE / "tempo.yaml")
    jaeger_ports = _collector_listens(jaeger) | {_port(jaeger["extensions"]["jaeger_query"]["http"]["endpoint"])}
    tempo_ports = {tempo["server"]["http_listen_port"]}
    tempo_ports |= {_port(p["endpoint"]) for p in tempo["distributor"]["receivers"]["otlp"]["protocols"].values()}
    compose = load(COMPOSE / "docker-compose.yaml")["services"]
    assert not any("--web.listen-address" in a for a in compose["prometheus"]["command"])
    assert not any("--web.listen-address" in a for a in compose["alertmanager"]["command"])
    return {
        "collector": _collector_listens(collector),
        "jaeger": jaeger_ports,
        "tempo": tempo_ports,
        "prometheus": {9090},  # Prometheus's default listen address, not overridden (asserted above)
        "alertmanager": {9093},  # likewise Alertmanager's
        "grafana": {3000},
    }


def _compose_edges() -> list[tuple[str, str, int, str]]:
    """(from, to host, to port, why) for every connection a compose config makes, read from the configs."""
    edges = []
    collector = load(COMPOSE / "otel-collector.yaml")
    for name, exporter in collector["exporters"].items():
        if name.startswith("otlp"):
            host, port = _host_port(exporter["endpoint"])
            edges.append(("collector", host, port, f"exporter {name}"))
    prometheus = load(COMPOSE / "prometheus.yaml")
    for job in prometheus["scrape_configs"]:
        for static in job["static_configs"]:
            for target in static["targets"]:
                host, port = _host_port(target)
                edges.append(("prometheus", host, port, f"scrape job {job['job_name']}"))
    for am in prometheus["alerting"]["alertmanagers"]:
        for static in am["static_configs"]:
            for target in static["targets"]:
                edges.append(("prometheus", *_host_port(target), "alerting"))
    tempo = load(COMPOSE / "tempo.yaml")
    for rw in tempo["metrics_generator"]["storage"]["remote_write"]:
        edges.append(("tempo", *_host_port(rw["url"]), "metrics-generator remote write"))
    jaeger = load(COMPOSE / "jaeger.yaml")
    for name, backend in jaeger["extensions"]["jaeger_storage"]["metric_backends"].items():
        edges.append(("jaeger", *_host_port(backend["prometheus"]["endpoint"]), f"SPM backend {name}"))
    datasources = load(COMPOSE / "grafana" / "provisioning" / "datasources" / "launchtrace.yaml")
    for ds in datasources["datasources"]:
        edges.append(("grafana", *_host_port(ds["url"]), f"datasource {ds['name']}"))
    return edges


EXPECTED_COMPOSE_EDGES = {
    ("collector", "jaeger", 4317),
    ("collector", "tempo", 4317),
    ("prometheus", "collector", 8888),
    ("prometheus", "collector", 8889),
    ("prometheus", "collector", 8890),
    ("prometheus", "tempo", 3200),
    ("prometheus", "alertmanager", 9093),
    ("tempo", "prometheus", 9090),
    ("jaeger", "prometheus", 9090),
    ("grafana", "prometheus", 9090),
    ("grafana", "tempo", 3200),
    ("grafana", "jaeger", 16686),
}


def test_compose_graph_every_connection_reaches_a_service_listening_on_that_port():
    services = load(COMPOSE / "docker-compose.yaml")["services"]
    listeners = _compose_listeners()
    assert set(listeners) == set(services)
    edges = _compose_edges()
    for source, host, port, why in edges:
        assert source in services, (source, why)
        assert host in services, f"{source} -> {host}:{port} ({why}): no such service"
        assert port in listeners[host], f"{source} -> {host}:{port} ({why}): {host} listens on {listeners[host]}"
    assert {(s, h, p) for s, h, p, _ in edges} >= EXPECTED_COMPOSE_EDGES


def test_compose_publishes_what_the_user_opens_and_mounts_files_that_exist():
    services = load(COMPOSE / "docker-compose.yaml")["services"]
    listeners = _compose_listeners()
    for name, svc in services.items():
        for mapping in svc.get("ports", []):
            _published, container_port = (int(x) for x in str(mapping).split(":"))
            assert container_port in listeners[name], (name, mapping)
        for volume in svc.get("volumes", []):
            source = volume.split(":")[0]
            if source.startswith("."):
                if source in ("./out",):
                    continue  # created by the Collector's file exporter
                assert (COMPOSE / source).exists(), (name, source)
        for dep in svc.get("depends_on", []):
            assert dep in services, (name, dep)
    published = {int(str(m).split(":")[0]) for s in services.values() for m in s.get("ports", [])}
    assert {4317, 4318, 16686, 3000, 9090, 9093, 3200} <= published  # the URLs deploy/README.md tells to open


def test_compose_mounts_match_what_the_configs_read():
    services = load(COMPOSE / "docker-compose.yaml")["services"]

    def mounts(name):
        return {v.split(":")[1]: v.split(":")[0] for v in services[name]["volumes"]}

    prometheus = load(COMPOSE / "prometheus.yaml")
    for rule_file in prometheus["rule_files"]:
        assert rule_file in mounts("prometheus"), rule_file
        assert (COMPOSE / mounts("prometheus")[rule_file]).resolve() == RULES
    assert "--web.enable-remote-write-receiver" in services["prometheus"]["command"]  # Tempo writes to it
    config_flag = next(a for a in services["collector"]["command"] if a.startswith("--config="))
    assert mounts("collector")[config_flag.split("=", 1)[1]] == "./otel-collector.yaml"
    provider = load(COMPOSE / "grafana" / "provisioning" / "dashboards" / "launchtrace.yaml")
    path = provider["providers"][0]["options"]["path"]
    assert mounts("grafana")[path] == "./grafana/dashboards"
    home = next(e for e in services["grafana"]["environment"] if e.startswith("GF_DASHBOARDS_DEFAULT_HOME"))
    assert (COMPOSE / "grafana" / "dashboards" / Path(home.split("=", 1)[1]).name).exists()


def test_grafana_panels_and_links_name_provisioned_datasources():
    datasources = load(COMPOSE / "grafana" / "provisioning" / "datasources" / "launchtrace.yaml")["datasources"]
    uids = {ds["uid"]: ds["type"] for ds in datasources}
    assert set(uids.values()) == {"prometheus", "tempo", "jaeger"}
    for ds in datasources:
        data = ds.get("jsonData", {})
        for link in data.get("exemplarTraceIdDestinations", []):
            assert link["datasourceUid"] in uids
        if "serviceMap" in data:
            assert uids[data["serviceMap"]["datasourceUid"]] == "prometheus"
    for path in DASHBOARDS:
        dash = json.loads(path.read_text())
        assert dash["uid"] and dash["title"]
        for panel in dash["panels"]:
            assert uids.get(panel["datasource"]["uid"]) == panel["datasource"]["type"], (path.name, panel["title"])
            assert panel["targets"], panel["title"]


# --- who talks to whom: Kubernetes ---------------------------------------------------------------------------


def test_k8s_graph_agents_gateways_tempo_alertmanager():
    agent = load(K8S / "collector-agent-values.yaml")
    gateway = load(K8S / "collector-gateway-values.yaml")
    tempo = load(K8S / "tempo-distributed-values.yaml")
    gateway_listens = _collector_listens(gateway["config"])
    # agent -> gateway Service (load_balancing, and the metrics pipeline)
    resolver = agent["config"]["exporters"]["load_balancing"]["resolver"]["k8s"]
    service, namespace = resolver["service"].split(".")
    assert service == gateway["fullnameOverride"]
    assert set(resolver["ports"]) <= gateway_listens
    assert {gateway["ports"]["otlp"]["servicePort"], gateway["ports"]["otlp"]["containerPort"]} <= gateway_listens
    host, port = _host_port(agent["config"]["exporters"]["otlp_grpc/gateway"]["endpoint"])
    assert host == f"{service}.{namespace}" and port in gateway_listens
    # every enabled chart port of the gateway is one its config listens on
    for name, p in gateway["ports"].items():
        if p.get("enabled"):
            assert p["containerPort"] in gateway_listens, name
    for ep in gateway["podMonitor"]["metricsEndpoints"]:
        assert gateway["ports"][ep["port"]]["enabled"]
    # gateway -> tempo-distributed's distributor (release "tempo": Service tempo-distributor), OTLP gRPC on
    host, port = _host_port(gateway["config"]["exporters"]["otlp_grpc/tempo"]["endpoint"])
    assert host == f"tempo-distributor.{namespace}" and port == 4317
    assert tempo["traces"]["otlp"]["grpc"]["enabled"]
    assert "helm install tempo " in (K8S / "tempo-distributed-values.yaml").read_text()
    # Tempo 3 microservices: a Kafka-compatible broker, partitions = block-builders = live-stores
    assert tempo["ingest"]["kafka"]["address"].endswith(":9092")
    assert tempo["blockBuilder"]["replicas"] == tempo["liveStore"]["replicas"]
    # the CronJob -> tempo-query-frontend:3200 and Alertmanager, in the same namespace
    (cronjob,) = yaml.safe_load_all((K8S / "alert-cronjob.yaml").read_text())
    assert cronjob["metadata"]["namespace"] == namespace
    command = " ".join(cronjob["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]["args"])
    assert f"--from tempo+http://tempo-query-frontend.{namespace}:3200" in command
    assert re.search(rf"--alertmanager http://[\w-]+\.{namespace}:9093", command)


def test_the_cronjob_runs_a_real_launchtrace_alert_command_line():
    """The CronJob's arguments parse with the real ``launchtrace alert`` parser."""
    import argparse
    import shlex

    from launchtrace.cli import alert

    (cronjob,) = yaml.safe_load_all((K8S / "alert-cronjob.yaml").read_text())
    script = cronjob["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]["args"][0]
    words = shlex.split(script.split(";")[0])
    assert words[:2] == ["launchtrace", "alert"]
    parser = argparse.ArgumentParser()
    alert.add_arguments(parser)
    args = parser.parse_args(words[2:])
    assert args.alertmanager and args.baseline == "/baseline/base.pb"
    from launchtrace.cli._fleet import source_kind

    assert source_kind(args) == ("tempo", ["http://tempo-query-frontend.observability:3200"])


# --- names: every metric and label a dashboard or rule uses is produced --------------------------------------


def produced_series() -> P.Produced:
    produced = P.Produced()
    produced.update(P.span_metrics_series(load(COMPOSE / "otel-collector.yaml")["connectors"]["span_metrics"]))
    produced.update(P.collector_telemetry_series())
    dims = load(COMPOSE / "tempo.yaml")["metrics_generator"]["processor"]["span_metrics"]["dimensions"]
    produced.update(P.tempo_generator_series(dims))
    produced.update(launchtrace_metric_series())
    return produced


_SCRAPED: list[P.Produced] = []


def launchtrace_metric_series() -> P.Produced:
    """launchtrace's own metrics as a real Warp process serves them: ``tests/fleet_app.py`` with
    ``start_metrics(exporters=("prometheus",))`` on loopback, scraped and parsed with ``prometheus_client``'s
    text parser. (Through a Collector the same OTLP metrics get the same names and, with
    ``resource_to_telemetry_conversion``, the same resource labels; the Collector cannot run here.)"""
    if _SCRAPED:
        return _SCRAPED[0]
    import time

    import requests
    from prometheus_client.parser import text_string_to_metric_families

    from fleet_gen import Member, metrics_address, start_serving_metrics

    out = P.Produced()
    with tempfile.TemporaryDirectory() as tmp:
        member = Member("clean", "1.0", "deploy-host", 1)
        extra = {"OTEL_SERVICE_NAME": "deploy-check", "FLEET_LINGER_S": "5"}
        proc, address_file = start_serving_metrics(member, 20, Path(tmp) / "spans.jsonl", extra)
        try:
            address = metrics_address(proc, address_file)
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline and "launchtrace_scope_steps_total" not in out.series:
                try:
                    text = requests.get(f"http://{address}/metrics", timeout=2).text
                except requests.RequestException:
                    time.sleep(0.2)
                    continue
                for family in text_string_to_metric_families(text):
                    for sample in family.samples:
                        if sample.name.startswith("launchtrace_"):
                            out.add(sample.name, set(sample.labels))
                time.sleep(0.2)
        finally:
            proc.wait(60)
    assert {"launchtrace_launches_total", "launchtrace_launch_duration_seconds_bucket"} <= set(out.series), out
    _SCRAPED.append(out)
    return out


def dashboard_queries() -> list[tuple[str, str, P.Used]]:
    queries = []
    for path in DASHBOARDS:
        dash = json.loads(path.read_text())
        for panel in dash["panels"]:
            for target in panel["targets"]:
                queries.append((path.name, panel["title"], P.names_in(target["expr"])))
        for var in dash.get("templating", {}).get("list", []):
            query = var["query"]["query"] if isinstance(var["query"], dict) else var["query"]
            queries.append((path.name, f"variable {var['name']}", P.names_in_template(query)))
    return queries


def rule_queries(produced: P.Produced) -> list[tuple[str, str, P.Used]]:
    """Every rule's names; a recording rule's series is added to ``produced`` (labelled by what its expression
    keeps: the labels it names, ``le`` aside) for the rules after it."""
    out = []
    for group in load(RULES)["groups"]:
        for rule in group["rules"]:
            used = P.names_in(rule["expr"])
            name = rule.get("alert") or rule.get("record")
            out.append((RULES.name, name, used))
            if "record" in rule:
                produced.add(rule["record"], used.labels - {"le"})
    return out


def test_every_dashboard_query_names_only_series_and_labels_we_produce():
    produced = produced_series()
    queries = dashboard_queries()
    assert len(queries) >= 8
    for where, what, used in queries:
        assert used.metrics, (where, what)
        assert P.unknown_names(used, produced) == [], (where, what)


def test_every_alert_rule_names_only_series_and_labels_we_produce():
    produced = produced_series()
    queries = rule_queries(produced)
    assert len(queries) >= 4
    for where, what, used in queries:
        assert P.unknown_names(used, produced) == [], (where, what)


def test_the_dashboard_is_the_generator_output():
    assert (COMPOSE / "grafana" / "dashboards" / "launchtrace-overview.json").read_text() == _script(
        "gen_grafana_dashboard"
    ).render()


def _script(name: str):
    import importlib.util

    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_dashboards_cover_what_the_issue_asks_for():
    titles = " | ".join(p["title"] for d in DASHBOARDS for p in json.loads(d.read_text())["panels"]).lower()
    for wanted in ("launches per kernel", "p95", "per scope", "fingerprints per service version", "dropped", "folded"):
        assert wanted in titles, wanted


def test_the_name_check_rejects_what_nobody_produces():
    produced = produced_series()
    used = P.names_in('sum by (launchtrace_kernal) (rate(traces_span_metrics_calls_total{span_name="x"}[5m]))')
    assert P.unknown_names(used, produced) == ["label launchtrace_kernal"]
    used = P.names_in("rate(traces_spanmetrics_calls_total{service_name='x'}[5m])")  # Tempo's label is `service`
    assert P.unknown_names(used, produced) == ["label service_name"]
    used = P.names_in("rate(traces_span_metrics_latency_bucket[5m])")  # the connector's old name
    assert P.unknown_names(used, produced) == ["metric traces_span_metrics_latency_bucket"]
    with pytest.raises(Exception):  # noqa: B017 (promql_parser raises a plain ValueError-like error)
        P.names_in("sum by (le (rate(x[5m])")


# --- the real Prometheus and Alertmanager tools --------------------------------------------------------------


def _tool(name: str) -> str:
    path = shutil.which(name) or f"/usr/bin/{name}"
    if not Path(path).exists():
        pytest.fail(f"{name} is missing: apt-get install prometheus prometheus-alertmanager (see .ci/run)")
    return path


def _run(*argv: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(argv, capture_output=True, text=True, timeout=120, cwd=cwd)


def test_promtool_check_config_on_the_compose_prometheus(tmp_path):
    """The rule file path is the container's; here it points at the repository's copy, as compose mounts it."""
    config = load(COMPOSE / "prometheus.yaml")
    config["rule_files"] = [str(RULES)]
    (tmp_path / "prometheus.yaml").write_text(yaml.safe_dump(config))
    result = _run(_tool("promtool"), "check", "config", str(tmp_path / "prometheus.yaml"))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout + result.stderr


def test_promtool_check_rules_and_test_rules():
    """The fleet issue's tests/test_prometheus_rules.py runs these too, and a live Prometheus on the rules."""
    result = _run(_tool("promtool"), "check", "rules", str(RULES))
    assert result.returncode == 0, result.stdout + result.stderr
    result = _run(_tool("promtool"), "test", "rules", RULES_TEST.name, cwd=RULES_TEST.parent)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout + result.stderr


def test_promtool_checks_the_k8s_prometheus_rule(tmp_path):
    assert (K8S / "prometheus-rules.yaml").read_text() == _script("gen_k8s_rules").render()
    (rule,) = yaml.safe_load_all((K8S / "prometheus-rules.yaml").read_text())
    assert rule["kind"] == "PrometheusRule"
    assert rule["spec"] == load(RULES), "generated from deploy/prometheus/launchtrace-rules.yaml: regenerate"
    (tmp_path / "groups.yaml").write_text(yaml.safe_dump(rule["spec"]))
    result = _run(_tool("promtool"), "check", "rules", str(tmp_path / "groups.yaml"))
    assert result.returncode == 0, result.stdout + result.stderr


def test_amtool_check_config_on_the_alertmanager_file():
    result = _run(_tool("amtool"), "check-config", str(COMPOSE / "alertmanager.yaml"))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout + result.stderr


def test_alertmanager_groups_by_labels_every_alert_carries():
    """Grouping by a label no alert has would put every alert in one notification."""
    route = load(COMPOSE / "alertmanager.yaml")["route"]
    produced = produced_series()
    rule_queries(produced)  # adds the recorded series
    for group in load(RULES)["groups"]:
        for rule in group["rules"]:
            if "alert" not in rule:
                continue
            carried = set(rule.get("labels", {})) | {"alertname"}
            for metric in P.names_in(rule["expr"]).metrics:
                carried |= produced.series[metric]
            assert set(route["group_by"]) <= carried, rule["alert"]
