"""A lesson's start sets the CPU budget: intra-op threads that leave other processes' busy cores to them."""

from __future__ import annotations

import torch

from helpers.course import lesson


def test_a_lesson_leaves_the_busy_cores_to_other_processes_and_says_so(monkeypatch):
    before = torch.get_num_threads()
    monkeypatch.setattr(lesson, "usable_cpu_count", lambda: 2)
    try:
        torch.set_num_threads(2)
        line = lesson.set_lesson_threads(busy=1)  # another process keeps one of the 2 cores busy
        assert torch.get_num_threads() == 1
        assert "1 intra-op thread on 2 usable cores" in line and "kept 1 of them busy" in line
        torch.set_num_threads(2)
        line = lesson.set_lesson_threads(busy=0)  # a quiet machine keeps torch's default
        assert torch.get_num_threads() == 2 and line == "CPU budget: 2 intra-op threads on 2 usable cores"
    finally:
        torch.set_num_threads(before)


def test_a_lesson_never_raises_the_thread_count_above_torchs_default(monkeypatch):
    before = torch.get_num_threads()
    monkeypatch.setattr(lesson, "usable_cpu_count", lambda: 64)
    try:
        torch.set_num_threads(1)
        lesson.set_lesson_threads(busy=0)
        assert torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(before)


def test_a_lesson_names_each_data_source_and_device_once_and_marks_every_smoke_line():
    from helpers.course.profiles import PROFILES

    cpu = lesson.Lesson(PROFILES["cpu"], torch.device("cpu"))  # not resolve_profile: COURSE_PROFILE may say smoke
    first, again = cpu.tag("12 img/s", "BSDS300"), cpu.tag("13 img/s", "BSDS300")
    other = cpu.tag("9 img/s", "CIFAR-10")
    assert first.startswith("12 img/s [data: BSDS300; device: CPU (") and again == "13 img/s"
    assert "data: CIFAR-10" in other and cpu.tag("8 img/s", "CIFAR-10") == "8 img/s"
    assert "device: CPU (" in cpu.tag("no data") and cpu.tag("still no data") == "still no data"
    smoke = lesson.Lesson(PROFILES["smoke"], torch.device("cpu"))
    smoke.tag("1 img/s", "BSDS300")
    assert smoke.tag("2 img/s", "BSDS300") == "[smoke run: not a measurement] 2 img/s"
