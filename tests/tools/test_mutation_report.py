"""The mutation report: the score counts timeouts as caught and leaves unchecked mutants out, and every survivor is
listed with its diff."""

from __future__ import annotations

from mutation_report import Results, write_report  # tools/ is on the path: tests/tools/conftest.py


def _results() -> Results:
    return Results(
        {
            "helpers.metrics.x_psnr_y__mutmut_1": "killed",
            "helpers.metrics.x_psnr_y__mutmut_2": "survived",
            "helpers.metrics.x_ssim_y__mutmut_1": "timeout",
            "helpers.metrics.x_ssim_y__mutmut_2": "not checked",
            "helpers.seeding.x_rank_seed__mutmut_1": "survived",
            "helpers.seeding.x_rank_seed__mutmut_2": "no tests",
        }
    )


def test_the_score_is_caught_over_checked():
    results = _results()
    assert results.score() == 2 / 4  # killed + timeout over those plus the 2 survivors; unchecked/no tests left out
    assert results.survivors() == ["helpers.metrics.x_psnr_y__mutmut_2", "helpers.seeding.x_rank_seed__mutmut_1"]
    assert "score 50.0%" in results.summary() and "2 survived" in results.summary()
    assert Results().score() is None and "n/a" in Results().summary()


def test_the_report_lists_each_survivor_with_its_diff(tmp_path):
    report = tmp_path / "mutation.md"
    write_report(
        report,
        _results(),
        work=tmp_path,
        scope="metrics, seeding",
        seconds=90,
        cut_off=True,
        diff=lambda name: f"-original {name}\n+mutant {name}",
    )
    text = report.read_text()
    assert "Modules mutated: metrics, seeding" in text and "1.5 min" in text and "cut off" in text
    assert "## Surviving mutants (2)" in text
    for name in _results().survivors():
        assert f"### {name}" in text and f"+mutant {name}" in text
    assert "x_psnr_y__mutmut_1" not in text  # killed mutants are not listed
