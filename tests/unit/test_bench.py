"""`make bench` rewrites only what it measured in docs/benchmarks.md: the hand-written history of the
re-bake (earlier figures, what changed, where the time goes) survives a run, and a section not measured
here (the re-bake without root) keeps its last figures."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gpuforge import bench

DOC = Path(__file__).resolve().parents[2] / "docs" / "benchmarks.md"
HAND_WRITTEN = ("### Earlier measurements and what changed", "Before (same machine and profile", "Where the idempotent")

REBAKE = {
    "first_s": 200.0,
    "second_s": 50.0,
    "ratio": 0.25,
    "first_changed": 51,
    "second_changed": 0,
    "slowest": [("os_tuning : Write kernel parameters", 4.2)],
    "started": "2030-01-02 03:04 UTC",
    "finished": "2030-01-02 03:10 UTC",
    "load": (3.5, 4.25),
}
ROW = {
    "groups": 1,
    "nodes": 9,
    "resources": 85,
    "plan_s": 9.125,
    "floor_s": 1.0,
    "ratio": 9.12,
    "plan_rss_mib": 1,
    "floor_rss_mib": 1,
}


@pytest.fixture
def doc(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A copy of the committed docs/benchmarks.md, and a bench whose measurements are synthetic."""
    copy = tmp_path / "benchmarks.md"
    copy.write_text(DOC.read_text())
    monkeypatch.setattr(bench, "measure", lambda groups, per_group, workdir: ROW)
    monkeypatch.setattr(bench, "prod_plan_seconds", lambda: 7.5)
    monkeypatch.setattr(bench, "CASES", [(1, 8)])
    _fake_sites(monkeypatch)
    return copy


def _fake_sites(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bench, "SITE_CASES", (128,))
    monkeypatch.setattr(bench, "measure_site", lambda hosts, workdir: SITE_ROW)
    monkeypatch.setattr(bench, "example_plan", lambda: {"wall_s": 42.0, "rss_mib": 900.0})

SITE_ROW = {**ROW, "hosts": 128, "resources": 171, "plan_s": 0.256, "ms_per_host": 2.0}


def _rebake(monkeypatch: pytest.MonkeyPatch, result: dict[str, Any] | str) -> None:
    monkeypatch.setattr(bench, "rebake_unavailable", lambda: result if isinstance(result, str) else None)
    monkeypatch.setattr(bench, "measure_rebake", lambda: result)


def test_the_committed_page_has_both_sections_markers() -> None:
    text = DOC.read_text()
    for section in ("plan", "onprem", "rebake"):
        start, end = bench._markers(section)
        assert text.count(start) == 1 and text.count(end) == 1 and text.index(start) < text.index(end)


def test_make_bench_replaces_the_measured_sections_and_keeps_the_hand_written_text(
    doc: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _rebake(monkeypatch, REBAKE)
    bench.main(["--output", str(doc)])
    text = doc.read_text()
    assert all(part in text for part in HAND_WRITTEN)
    assert "| 1 | 9 | 85 | 9.125 | 1.000 | 9.12 | 1 | 1 |" in text and "imports included): 7.50 s" in text
    assert "| first (installs) | 200.0 | 51 |" in text and "Ratio second/first: **0.25** (target met)." in text
    assert "Measured 2030-01-02 03:04 UTC to 2030-01-02 03:10 UTC, load average (1 min) 3.5 at the start" in text
    # The figures it replaced are gone, once: no section was appended beside the old one.
    assert "| 64 | 4224 |" not in text and text.count("| run | wall time (s) | changed |") == 1
    assert text.index("Ratio second/first") < text.index("### Earlier measurements")


def test_a_rebake_not_measured_here_keeps_the_last_figures(doc: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    before = doc.read_text()
    _rebake(monkeypatch, "needs root (the chroot connection)")
    bench.main(["--output", str(doc)])
    text = doc.read_text()
    rebake = before.split("<!-- make bench: rebake -->", 1)[1]
    assert text.endswith(rebake) and "Not measured here" not in text
    bench.main(["--rebake-only", "--output", str(doc)])
    assert doc.read_text() == text


def test_rebake_only_rewrites_the_rebake_section_alone(doc: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    before = doc.read_text()
    _rebake(monkeypatch, {**REBAKE, "ratio": 0.5})
    bench.main(["--rebake-only", "--output", str(doc)])
    text = doc.read_text()
    plan = before.split("<!-- make bench: end plan -->", 1)[0]
    assert text.startswith(plan) and all(part in text for part in HAND_WRITTEN)
    assert "Ratio second/first: **0.50** (target of 0.40 missed)." in text


def test_an_output_without_markers_is_refused_not_overwritten(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    page = tmp_path / "benchmarks.md"
    page.write_text("# Benchmarks\n\nHand-written only.\n")
    _rebake(monkeypatch, REBAKE)
    with pytest.raises(SystemExit, match=r"the rebake section has no markers.*<!-- make bench: rebake -->"):
        bench.main(["--rebake-only", "--output", str(page)])
    assert page.read_text() == "# Benchmarks\n\nHand-written only.\n"


def test_a_new_page_gets_both_sections_with_their_markers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    page = tmp_path / "benchmarks.md"
    monkeypatch.setattr(bench, "measure", lambda groups, per_group, workdir: ROW)
    monkeypatch.setattr(bench, "prod_plan_seconds", lambda: 7.5)
    monkeypatch.setattr(bench, "CASES", [(1, 8)])
    _fake_sites(monkeypatch)
    _rebake(monkeypatch, REBAKE)
    bench.main(["--output", str(page)])
    text = page.read_text()
    assert text.startswith("# Benchmarks\n\n<!-- make bench: plan -->\nMeasured by `make bench`")
    assert "## Re-bake\n\n<!-- make bench: rebake -->\n" in text and text.rstrip().endswith(
        "<!-- make bench: end rebake -->"
    )


def test_a_failing_measured_command_fails_the_bench(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A time of a command that did not plan is no figure: `make bench` stops with its exit and output."""
    monkeypatch.setattr(bench, "PROD_PLAN", ["-m", "gpuforge", "plan", "no-such-stack"])
    monkeypatch.setattr(bench, "CASES", [])
    monkeypatch.setattr(bench, "rebake_unavailable", lambda: "not root")
    output = tmp_path / "benchmarks.md"
    output.write_text(DOC.read_text())
    with pytest.raises(SystemExit) as stopped:
        bench.main(["--output", str(output)])
    message = str(stopped.value.code)
    assert message.startswith("make bench: `") and "gpuforge plan no-such-stack` failed (exit 2)" in message
    assert "no stack 'no-such-stack'" in message
    assert output.read_text() == DOC.read_text()  # nothing written from a failed measurement


def test_the_prod_plan_it_times_is_the_real_command() -> None:
    assert bench.PROD_PLAN[:3] == ["-m", "gpuforge", "plan"]
    assert bench.prod_plan_seconds() > 0  # exits 0, or MeasuredCommandFailed would have been raised


def test_make_bench_reports_sites_per_host_and_the_example(doc: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _rebake(monkeypatch, REBAKE)
    bench.main(["--output", str(doc)])
    text = doc.read_text()
    assert "| 128 | 171 | 0.26 | 2.00 | 1.00 | 9.12 | 1 | 1 |" in text
    assert "Aim of at most 2 ms per host: met (worst 2.00 ms)." in text
    assert "end to end in a fresh process: 42.0 s, peak RSS 900 MiB (aim: under 60 s and 4 GiB: met)" in text
    assert text.count("<!-- make bench: onprem -->") == 1


def test_sites_only_rewrites_the_site_section_alone(doc: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bench, "measure", lambda *_: pytest.fail("the AWS plans are not measured with --sites-only"))
    before = doc.read_text()
    bench.main(["--output", str(doc), "--sites-only"])
    after = doc.read_text()
    assert after.split("<!-- make bench: onprem -->")[0] == before.split("<!-- make bench: onprem -->")[0]
    assert "| 128 | 171 |" in after


def test_the_bench_sites_pass_the_fabric_checks_at_every_size() -> None:
    """The stacks make bench plans are valid sites: the resize keeps every per-tier check passing."""
    from gpuforge.spec import resolve  # local: only this test resolves a spec

    for hosts in (128, 1024):
        spec = bench.site_stack(hosts)["config"]["gpuforge:cluster"]
        site = resolve(spec).site
        assert site is not None and len(site.hosts) == hosts
