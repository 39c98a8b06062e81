"""Shared fixtures: Warp on the CPU device, quiet, and instrumentation that never leaks between tests."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("WARP_CACHE_PATH", str(Path.home() / ".cache" / "warp"))

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"
FIXTURES = SHARED / "fixtures" / "upstream"


def upstream_fixtures() -> Path:
    """``../shared/fixtures/upstream`` (real backend responses, read in place, never copied in), or a loud error.

    The one place tests find them: a test module that reads or globs them calls this at import, so a checkout
    without ``../shared`` fails at collection instead of collecting nothing and passing.
    """
    if not (FIXTURES / "README.md").is_file():
        raise RuntimeError(
            f"the upstream fixtures are missing: {FIXTURES} (the tests read real backend responses from "
            "../shared/fixtures/upstream beside the checkout; see README.md, Development)"
        )
    return FIXTURES


# Modules whose tests run real servers, subprocesses, Warp's own examples, soak loops or many-example fuzzing:
# marked ``slow`` so ``pytest -m "not slow"`` is a development loop of under three minutes (README.md,
# Development). CI runs everything. A module belongs here when it takes over ~10 s alone on the 2-core machine.
SLOW_MODULES = frozenset(
    {
        "test_crash_loss.py",
        "test_deploy.py",
        "test_docs_commands.py",
        "test_e2e_otlp.py",
        "test_fleet_alerts.py",
        "test_fork.py",
        "test_fuzz_commands.py",
        "test_fuzz_readers.py",
        "test_hostile_collect.py",
        "test_hostile_files.py",
        "test_hostile_pull.py",
        "test_jaeger_live.py",
        "test_jaeger_live_big.py",
        "test_jaeger_live_collector.py",
        "test_jaeger_live_errors.py",
        "test_misuse.py",
        "test_prometheus_rules.py",
        "test_reliability_capture.py",
        "test_reliability_sinks.py",
        "test_reliability_soak.py",
        "test_reliability_threads.py",
        "test_render_html.py",
        "test_run_children.py",
        "test_security_tls.py",
        "test_tinygrad.py",
        "test_tinygrad_native.py",
        "test_warp_examples.py",
        "test_warp_unittests.py",
    }
)


# Single tests of the other modules that took longest in the loop (two runs of pytest --durations -m "not slow",
# every parametrization included): mostly property tests over many generated examples.
SLOW_TESTS = frozenset(
    {
        "tests/test_analysis_dataflow.py::test_the_critical_path_follows_measured_durations",
        "tests/test_analysis_dataflow.py::test_two_cpu_threads_racing_on_one_buffer_is_a_hazard",
        "tests/test_analysis_diff.py::test_a_changed_launch_dim_is_reported_exactly",
        "tests/test_analysis_diff.py::test_a_changed_scalar_is_reported_by_parameter_name",
        "tests/test_analysis_diff.py::test_a_swapped_buffer_is_reported_by_owner_label",
        "tests/test_analysis_diff.py::test_an_extra_scope_occurrence_is_wholly_inserted",
        "tests/test_analysis_diff.py::test_an_inserted_launch_is_reported_exactly",
        "tests/test_analysis_diff.py::test_formats_carry_the_same_entries",
        "tests/test_analysis_diff.py::test_sets_of_traces_match_by_scope_name_and_occurrence",
        "tests/test_analysis_programs.py::test_a_written_trace_file_loads_back_with_the_same_topology",
        "tests/test_analysis_programs.py::test_capture_gives_the_analyzer_owners_and_access",
        "tests/test_analysis_runs.py::test_a_run_is_one_process_and_merges_in_issue_order",
        "tests/test_analysis_runs.py::test_records_rebuilt_from_a_summary_span_say_so",
        "tests/test_analysis_runs.py::test_replays_run_the_captured_launches_across_traces",
        "tests/test_analysis_runs.py::test_steps_are_chosen_by_scope_trace_and_occurrence",
        "tests/test_analysis_static.py::test_a_buffer_allocated_per_call_is_named",
        "tests/test_analysis_static.py::test_a_launch_issued_only_sometimes_is_varying_launches",
        "tests/test_analysis_static.py::test_a_missing_scope_has_no_occurrences",
        "tests/test_analysis_static.py::test_a_repeated_identical_step_is_static",
        "tests/test_analysis_static.py::test_a_stable_foreign_buffer_is_only_a_warning",
        "tests/test_analysis_static.py::test_ping_pong_between_owned_buffers_is_varying_buffers",
        "tests/test_analysis_static.py::test_varying_dims_and_scalars_are_named",
        "tests/test_cli_analyzer.py::test_diff_exits_0_when_equal_and_1_when_topology_differs",
        "tests/test_collect.py::test_fast_transcoding_matches_json_format",
        "tests/test_encode_jsonl.py::test_each_line_loads_to_what_the_codec_writes",
        "tests/test_encode_proto.py::test_bytes_parse_to_the_field_by_field_message",
        "tests/test_encode_proto.py::test_caches_do_not_leak_between_batches",
        "tests/test_export_metrics.py::test_counts_are_exact_when_traces_are_sampled_out_and_folded",
        "tests/test_fleet_fast.py::test_cli_baseline_equals_the_straightforward_one",
        "tests/test_fleet_fast.py::test_fast_path_gives_the_straightforward_baseline",
        "tests/test_fold_modes.py::test_a_loop_of_ten_thousand_steps_stays_within_the_budget_with_its_topology",
        "tests/test_fold_modes.py::test_the_default_exports_a_cloth_program_in_full_one_span_per_launch",
        "tests/test_graph_capture.py::test_exported_capture_and_replays_survive_a_file_and_rebuild_across_traces",
        "tests/test_json_codec.py::test_encode_then_decode_gives_equal_spans",
        "tests/test_jsonenc_native.py::test_lines_parse_with_json_format_into_the_reference_message",
        "tests/test_jsonenc_native.py::test_no_leak_over_100k_encodes",
        "tests/test_jsonenc_native.py::test_same_bytes_as_encode_line",
        "tests/test_jsonread_native.py::test_any_attribute_objects_give_no_answer_or_the_general_one",
        "tests/test_jsonread_native.py::test_caches_stay_bounded",
        "tests/test_jsonread_native.py::test_generated_spans_are_read_as_the_general_decoder_reads_them",
        "tests/test_materialize_fast.py::test_fast_path_equals_general_path",
        "tests/test_materialize_fast.py::test_owner_answers_cached_across_registry_changes_equal_the_registry",
        "tests/test_protoenc_native.py::test_parses_to_the_message_the_library_builds",
        "tests/test_roundtrip_property.py::test_auto_folding_a_trace_past_its_budget_keeps_its_records_and_topology",
        "tests/test_roundtrip_property.py::test_export_then_rebuild_gives_the_records_back",
    }
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if item.path.name in SLOW_MODULES or item.nodeid.split("[")[0] in SLOW_TESTS:
            item.add_marker(pytest.mark.slow)


@pytest.fixture(scope="session")
def warp_cpu():
    """Warp, initialised once, quiet."""
    import warp as wp

    wp.config.quiet = True
    wp.init()
    return wp


@pytest.fixture
def instrumented(warp_cpu):
    """Warp patched for the test's duration; restored afterwards whatever happens."""
    import launchtrace.capture as capture

    capture.instrument()
    yield capture
    capture.uninstrument()


from jaeger_live import jaeger  # noqa: E402, F401  (the real Jaeger, one per test run: tests/jaeger_live.py)
