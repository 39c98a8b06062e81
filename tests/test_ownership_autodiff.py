"""Ownership through autodiff and optimizers: ``own()`` labels ``.grad`` arrays and Warp's optimizer state.

A real Tape + ``warp.optim.Adam`` fit (and an SGD-with-momentum one) on the CPU, exported with the real
pipeline to the file sink and read back: every array argument of every span (the forward launch, the adjoint
launch, ``Tape.backward``'s seed fill, ``tape.zero()``'s fills, the optimizer's step kernel) carries an owner
label, none is foreign. The fit's own result (``x`` reaches ``target``) shows the launches are the real ones.
"""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pytest
import warp as wp
import warp.optim

import launchtrace
import launchtrace.capture as capture
import launchtrace.export as export
from launchtrace import conventions as C
from launchtrace.ownership import buffers_of
from launchtrace.sources.files import read_spans
from launchtrace.testing import trace_launches

N = 8


@wp.kernel
def squared_error(x: wp.array(dtype=float), target: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    d = x[i] - target[i]
    wp.atomic_add(loss, 0, d * d)


class Problem:
    def __init__(self) -> None:
        self.x = wp.zeros(N, dtype=float, device="cpu", requires_grad=True)
        self.target = wp.array(np.linspace(0.0, 1.0, N, dtype=np.float32), dtype=float, device="cpu")
        self.loss = wp.zeros(1, dtype=float, device="cpu", requires_grad=True)

    def fit_step(self, optimizer) -> None:
        tape = wp.Tape()
        with tape:
            wp.launch(squared_error, dim=N, inputs=[self.x, self.target, self.loss], device="cpu")
        tape.backward(self.loss)
        optimizer.step([self.x.grad])
        tape.zero()
        self.loss.zero_()


@pytest.fixture(autouse=True)
def _clean(warp_cpu):
    yield
    export.stop_export(20)
    for label in ("prob", "opt"):
        launchtrace.disown(label)
    capture.uninstrument()


def _owners(span) -> dict[str, str | None]:
    """``{argument label: owner}`` of a record span's array arguments."""
    params = tuple(span.attribute(C.PARAMS) or ())
    keys = tuple(span.attribute(C.ARRAY_KEYS) or ())
    labels, _ = C.arg_labels(params, keys, tuple(span.attribute(C.SCALAR_KEYS) or ()))
    return {label: span.attribute(C.arg_attr(label, C.ARG_OWNER)) for label in labels}


@pytest.mark.parametrize("optimizer", ["adam", "sgd"])
def test_own_labels_gradients_and_optimizer_state_in_exported_spans(tmp_path: Path, optimizer: str) -> None:
    prob = Problem()
    if optimizer == "adam":
        opt = warp.optim.Adam([prob.x], lr=0.1)
        state = {"m": "opt.m[0]", "v": "opt.v[0]"}
    else:
        opt = warp.optim.SGD([prob.x], lr=0.05, momentum=0.5)
        state = {"b": "opt.b[0]"}
    prob.fit_step(opt)  # compile outside the export
    launchtrace.own(prob, "prob")
    launchtrace.own(opt, "opt")
    path = tmp_path / "fit.jsonl"
    export.start_export(file_path=str(path), truncate=True, fold=False)
    with launchtrace.scope("fit"):
        for _ in range(60):
            prob.fit_step(opt)
    assert export.stop_export(20).dropped == 0
    np.testing.assert_allclose(prob.x.numpy(), prob.target.numpy(), atol=0.05)  # the fit converged

    read = read_spans(path)
    assert not read.problems
    spans = [s for s in read.spans if s.attribute(C.OP)]
    by_kind: dict[str, list] = {}
    for span in spans:
        kind = "adjoint" if span.attribute(C.ADJOINT) else span.attribute(C.API) or ""
        if span.attribute(C.OP) == "launch" and span.name.startswith("warp.optim."):
            kind = "step"
        by_kind.setdefault(kind, []).append(span)
    forward = by_kind["wp.launch"][0]
    assert _owners(forward) == {"x": "prob.x", "target": "prob.target", "loss": "prob.loss"}
    adjoint = by_kind["adjoint"][0]
    assert _owners(adjoint) == {
        "x": "prob.x",
        "target": "prob.target",
        "loss": "prob.loss",
        "adj_x": "prob.x.grad",
        "adj_loss": "prob.loss.grad",
    }
    step = by_kind["step"][0]
    assert {k: v for k, v in _owners(step).items() if k in state} == state
    assert _owners(step)["params"] == "prob.x"  # the optimizer's params keep the problem's label
    assert _owners(step)["g"] == "prob.x.grad"
    seeds = {_owners(s)["array"] for s in by_kind["wp.array.fill_"]}
    assert seeds == {"prob.loss.grad"}  # Tape.backward seeds d loss / d loss = 1
    zeroed = {_owners(s)["array"] for s in by_kind["wp.array.zero_"]}
    assert zeroed == {"prob.x.grad", "prob.loss.grad", "prob.loss"}  # tape.zero() and the user's zero_
    for span in spans:
        assert all(owner is not None for owner in _owners(span).values()), span.name
        assert not any(span.attribute(C.arg_attr(label, C.ARG_FOREIGN)) for label in _owners(span)), (
            f"{span.name} has a foreign argument"
        )


def test_buffers_of_reaches_grads_and_optimizer_state_but_not_the_params_twice() -> None:
    prob = Problem()
    opt = warp.optim.Adam([prob.x], lr=0.1)
    labels = buffers_of(prob, root="prob").labels()
    assert sorted(labels) == ["prob.loss", "prob.loss.grad", "prob.target", "prob.x", "prob.x.grad"]
    assert set(buffers_of(opt, root="opt").labels()) == {"opt.m[0]", "opt.v[0]"}
    with trace_launches() as trace:
        wp.launch(squared_error, dim=N, inputs=[prob.x, prob.target, prob.loss], device="cpu")
    assert not trace.foreign_pointers(buffers_of(prob, root="prob"))


def test_own_of_an_object_without_buffers_warns_naming_its_type(caplog) -> None:
    empty_adam = warp.optim.Adam(lr=0.1)  # no params yet: no moments allocated
    with caplog.at_level(logging.WARNING, logger="launchtrace.ownership"):
        owned = launchtrace.own(empty_adam, "opt")
    assert len(owned) == 0
    (message,) = [r.getMessage() for r in caplog.records if r.name == "launchtrace.ownership"]
    assert "Adam" in message and "'opt'" in message and "nothing labelled" in message
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="launchtrace.ownership"):
        launchtrace.own(Problem(), "prob")
    assert not [r for r in caplog.records if r.name == "launchtrace.ownership"]
