"""Step-side speed-ups: what the machine supports is checked (no C++ compiler: compile is skipped with the reason),
fused/foreach optimizers train like the plain ones, and the side-by-side measurement gives ranges, start-up costs
and pay-back only for a speed-up whose whole range is faster."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import helpers.speedups as speedups
from helpers.speedups import (
    SpeedUps,
    build_fast_step,
    compiler_status,
    fast_optimizer,
    measure_speedups,
)


def _net():
    torch.manual_seed(0)
    return nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.ReLU(), nn.Flatten(), nn.Linear(4 * 8 * 8, 2))


def _example():
    generator = torch.Generator().manual_seed(0)
    return torch.randn(4, 3, 8, 8, generator=generator), torch.tensor([0, 1, 0, 1])


def test_without_a_cpp_compiler_compile_is_skipped_with_the_reason(monkeypatch):
    compiler_status.cache_clear()
    monkeypatch.delenv("CXX", raising=False)
    monkeypatch.setattr(speedups.shutil, "which", lambda name: None)
    try:
        usable, why = compiler_status("cpu")
        assert not usable and "no C++ compiler found" in why
        step, notes = build_fast_step(_net(), nn.CrossEntropyLoss(), device="cpu", options=SpeedUps(compile=True))
        assert not isinstance(step.model, torch._dynamo.eval_frame.OptimizedModule)
        assert any(n.startswith("compile skipped: no C++ compiler") for n in notes)
        rows = measure_speedups(_net, _example(), nn.CrossEntropyLoss(), device="cpu", rounds=1, per_round=1)
        assert {r["name"]: r.get("skipped", "") for r in rows}["torch.compile"].startswith("no C++ compiler")
    finally:
        compiler_status.cache_clear()


def test_a_broken_compiler_is_named(monkeypatch, tmp_path):
    compiler_status.cache_clear()
    fake = tmp_path / "g++"
    fake.write_text("#!/bin/sh\necho 'cannot find crt1.o' >&2\nexit 1\n")
    fake.chmod(0o755)
    monkeypatch.setenv("CXX", str(fake))
    try:
        usable, why = compiler_status("cpu")
        assert not usable and "cannot build a test program: cannot find crt1.o" in why
    finally:
        compiler_status.cache_clear()


def test_compile_on_cuda_needs_triton_and_a_c_compiler_that_builds_against_python_h(monkeypatch, tmp_path):
    real_find_spec = speedups.importlib.util.find_spec
    monkeypatch.setattr(
        speedups.importlib.util, "find_spec", lambda n: object() if n == "triton" else real_find_spec(n)
    )
    broken = tmp_path / "cc"
    broken.write_text("#!/bin/sh\necho 'fatal error: Python.h: No such file or directory' >&2\nexit 1\n")
    broken.chmod(0o755)
    cases = [
        ({"CC": str(broken)}, lambda name: None, False, "cannot build a test program: fatal error: Python.h"),
        ({}, lambda name: None, False, "no host C compiler ($CC, gcc or clang)"),
    ]
    for env, which, usable, reason in cases:
        compiler_status.cache_clear()
        monkeypatch.delenv("CC", raising=False)
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        monkeypatch.setattr(speedups.shutil, "which", which)
        try:
            found, why = compiler_status("cuda")
            assert (found, reason in why) == (usable, True), why
        finally:
            compiler_status.cache_clear()


@pytest.mark.parametrize("kind", ["sgd", "adam", "adamw"])
def test_fast_optimizers_train_like_the_plain_ones(kind):
    x, y = _example()
    plain, fast = _net(), _net()
    options = {"momentum": 0.9} if kind == "sgd" else {}
    reference = {"sgd": torch.optim.SGD, "adam": torch.optim.Adam, "adamw": torch.optim.AdamW}[kind](
        plain.parameters(), lr=0.01, foreach=False, **options
    )
    optimizer, note = fast_optimizer(kind, fast.parameters(), device="cpu", lr=0.01, **options)
    assert optimizer.defaults.get("fused") or optimizer.defaults.get("foreach")
    assert note.startswith(kind)
    for model, opt in ((plain, reference), (fast, optimizer)):
        for _ in range(3):
            opt.zero_grad()
            nn.functional.cross_entropy(model(x), y).backward()
            opt.step()
    for a, b in zip(plain.parameters(), fast.parameters()):
        torch.testing.assert_close(a, b, atol=1e-6, rtol=1e-5)
    with pytest.raises(ValueError, match="kind must be one of"):
        fast_optimizer("lamb", fast.parameters(), device="cpu", lr=0.1)


def test_pay_back_is_given_only_when_faster_in_every_interleaved_round():
    rows = [
        {"name": "plain", "first_call_s": 0.02},
        {"name": "fast", "first_call_s": 2.0},
        {"name": "noisy", "first_call_s": 1.0},
        {"name": "compile", "skipped": "no compiler"},
    ]
    # noisy is slower than plain in round 1 (its ranges overlap too); fast is faster in every round
    times = {"plain": [10.0, 11.0, 12.0], "fast": [5.0, 6.0, 7.0], "noisy": [10.5, 9.0, 8.0]}
    out = {r["name"]: r for r in speedups._with_payback(rows, times)}
    assert out["fast"]["faster"] and out["fast"]["step_ms_range"] == (5.0, 7.0)
    assert out["fast"]["pays_off_after"] == round(1000 * (2.0 - 0.006) / 5.0)  # start-up / ms saved per step
    assert not out["noisy"]["faster"] and out["noisy"]["pays_off_after"] is None
    assert out["compile"] == {"name": "compile", "skipped": "no compiler"}


def test_the_measured_rows_train_real_steps():
    rows = measure_speedups(
        _net, _example(), nn.CrossEntropyLoss(), device="cpu", rounds=2, per_round=1, skip_compile="not in this test"
    )
    measured = [r for r in rows if "skipped" not in r]
    assert [r["name"] for r in measured] == ["plain step (foreach off)", "fused/foreach optimizer", "channels_last"]
    assert all(r["step_ms_range"][0] <= r["step_ms"] <= r["step_ms_range"][1] for r in measured)
    assert any("channels_last" in n for n in measured[2]["notes"])
    assert [r["skipped"] for r in rows if "skipped" in r] == ["not in this test"] * 2  # compile: model, whole step


def test_a_compile_that_fails_at_run_time_skips_its_row_and_the_others_are_measured(monkeypatch):
    from helpers import speedups

    monkeypatch.setattr(speedups, "compiler_status", lambda device_type: (True, "a C++ compiler works"))

    class Broken(nn.Module):  # what torch.compile returns, failing as inductor does when its C++ build fails
        def forward(self, *args):
            raise RuntimeError("C++ compile error\nNo space left on device")

    def broken_compile(model, **kwargs):
        return Broken()

    monkeypatch.setattr(speedups.torch, "compile", broken_compile)
    variants = {"plain": speedups.SpeedUps(fused_optimizer=False), "compiled": speedups.SpeedUps(compile=True)}
    rows = measure_speedups(
        _net, _example(), nn.CrossEntropyLoss(), device="cpu", variants=variants, rounds=2, per_round=1
    )
    by_name = {r["name"]: r for r in rows}
    assert "step_ms" in by_name["plain"]
    assert by_name["compiled"]["skipped"].startswith("torch.compile failed here (RuntimeError: C++ compile error)")


class TestOptionsHandedOn:
    """build_fast_step hands each option on: the compile mode to torch.compile, channels_last to the step it builds."""

    def test_the_compile_mode_reaches_torch_compile(self, monkeypatch):
        modes: list[str | None] = []
        monkeypatch.setattr(speedups, "compiler_status", lambda device_type: (True, "stubbed"))
        monkeypatch.setattr(torch, "compile", lambda model, mode=None, **kwargs: modes.append(mode) or model)
        build_fast_step(
            nn.Linear(2, 1), nn.MSELoss(), device="cpu", options=SpeedUps(compile=True, compile_mode="max-autotune")
        )
        assert modes == ["max-autotune"]

    def test_channels_last_reaches_the_step(self):
        model = nn.Conv2d(3, 2, 3)
        step, notes = build_fast_step(model, nn.MSELoss(), device="cpu", options=SpeedUps(channels_last=True))
        assert step.channels_last and "channels_last" in notes
        assert model.weight.is_contiguous(memory_format=torch.channels_last)
        plain, _ = build_fast_step(
            nn.Conv2d(3, 2, 3), nn.MSELoss(), device="cpu", options=SpeedUps(channels_last=False)
        )
        assert not plain.channels_last

    def test_fused_where_the_device_has_it_and_foreach_with_the_same_rate_where_not(self):
        from helpers.speedups import fast_optimizer

        fused, note = fast_optimizer("sgd", [nn.Parameter(torch.zeros(2))], device="cpu", lr=0.3)
        assert fused.defaults["fused"] is True and "fused" in note
        fallback, note = fast_optimizer(
            "sgd", [nn.Parameter(torch.zeros(2))], device="cpu", lr=0.3, differentiable=True
        )
        assert fallback.defaults["foreach"] is True and fallback.defaults["lr"] == 0.3 and "foreach" in note

    def test_compile_optimizer_compiles_the_optimizer_step_too(self, monkeypatch):
        compiled: list[str] = []

        def fake_compile(target=None, **kwargs):
            if target is None:  # used as a decorator: @torch.compile(fullgraph=False)
                return lambda function: compiled.append("optimizer step") or function
            compiled.append("model")
            return target

        monkeypatch.setattr(speedups, "compiler_status", lambda device_type: (True, "stubbed"))
        monkeypatch.setattr(torch, "compile", fake_compile)
        options = SpeedUps(compile=True, compile_optimizer=True)
        _, notes = build_fast_step(nn.Linear(2, 1), nn.MSELoss(), device="cpu", options=options)
        assert compiled == ["model", "optimizer step"] and "optimizer.step compiled" in notes

    def test_the_plain_row_is_plain(self):
        from helpers.speedups import speedup_variants

        plain = speedup_variants("cpu")["plain step (foreach off)"]
        assert (plain.fused_optimizer, plain.compile, plain.channels_last, plain.cudnn_benchmark) == (
            False,
            False,
            False,
            False,
        )


def test_each_compile_row_starts_cold(monkeypatch):
    from helpers import speedups

    events: list[str] = []
    monkeypatch.setattr(speedups, "compiler_status", lambda device_type: (True, "stubbed"))
    monkeypatch.setattr(speedups.torch._dynamo, "reset", lambda: events.append("reset"))

    def fake_compile(model=None, **kwargs):  # also used as @torch.compile(fullgraph=False)
        events.append("compile")
        return model if model is not None else (lambda function: function)

    monkeypatch.setattr(speedups.torch, "compile", fake_compile)
    rows = measure_speedups(_net, _example(), nn.CrossEntropyLoss(), device="cpu", rounds=2, per_round=1)
    compiled = [r["name"] for r in rows if "compile" in r["name"] and "skipped" not in r]
    assert len(compiled) == 2 and events.count("reset") == 2
    assert events[0] == "reset" and events.index("reset", 1) > 1  # a reset before each compile row's build
