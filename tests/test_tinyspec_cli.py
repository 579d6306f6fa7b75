"""The `tinyspec` command (conformance/__main__.py, also `python -m conformance`): argparse subcommands run, grade,
merge and scoreboard; `run` hands its arguments to pytest with the installed suite (`--pyargs conformance`)."""
from __future__ import annotations

import json

import pytest

from conformance import __main__ as cli
from conformance.scoreboard import scoreboard_cells


def _row(op, dtype, prop, passed, failed, fraction):
  return {"op": op, "dtype": dtype, "property": prop, "pass": passed, "fail": failed, "xfail": 0, "skip": 0,
          "worst_fraction": fraction, "worst_ulps": 0.0, "clauses": [], "failures": []}


def _report(tmp_path, name, backend, rows):
  (tmp_path / name).mkdir()
  (tmp_path / name / "conformance.json").write_text(json.dumps({
    "backend": backend, "impl": "conformance.adapters.refimpl:RefimplAdapter", "results": rows, "clauses": {}}))
  return str(tmp_path / name)


def test_run_passes_every_argument_to_pytest_on_the_installed_suite(monkeypatch):
  seen = []
  monkeypatch.setattr(pytest, "main", lambda args: seen.append(args) or 3)
  assert cli.main(["run", "--impl", "m:A", "--backend", "CPU", "-k", "add", "-n", "2"]) == 3
  assert seen == [["--pyargs", "conformance", "--impl", "m:A", "--backend", "CPU", "-k", "add", "-n", "2"]]


def test_scoreboard_prints_a_row_per_op_dtype_and_a_column_per_property_and_run(tmp_path, capsys):
  py = _report(tmp_path, "py", "PYTHON", [_row("exp", "float32", "forward", 2, 0, 0.25)])
  cpu = _report(tmp_path, "cpu", "CPU", [_row("exp", "float32", "forward", 1, 1, None),
                                         _row("exp", "float16", "vjp", 1, 0, 0.0)])
  assert cli.main(["scoreboard", py, cpu]) == 0
  out = capsys.readouterr().out
  assert "| op | dtype | forward PYTHON | forward CPU | vjp CPU |" in out.replace(py, "PYTHON").replace(cpu, "CPU")
  rows = [line for line in out.splitlines() if line.startswith("| `exp`")]
  assert rows[0].startswith("| `exp` | float16 |") and rows[0].endswith("| 0 |")   # the vjp cell of CPU only
  assert "0.25" in rows[1] and "FAIL" in rows[1]


def test_scoreboard_with_out_writes_the_markdown_and_the_html_page(tmp_path, capsys):
  py = _report(tmp_path, "py", "PYTHON", [_row("exp", "float32", "forward", 2, 0, 0.25)])
  assert cli.main(["scoreboard", py, "-o", str(tmp_path / "board")]) == 0
  assert "0.25" in (tmp_path / "board" / "scoreboard.md").read_text()
  assert "<table" in (tmp_path / "board" / "scoreboard.html").read_text()


def test_scoreboard_adds_up_shards_of_one_run():
  from conformance.report import merge_runs
  sel = {"args": ["conformance"], "keyword": "", "markexpr": "", "profile": "ci"}
  shard = lambda k, row, test: {"backend": "CPU", "impl": "x:A", "clauses": {}, "results": [row],
                                "shard": {"k": k, "n": 2}, "selection": sel, "tests": {test: "pass"}}
  merged = merge_runs([shard(1, _row("exp", "float32", "forward", 2, 0, 0.5), "t1"),
                       shard(2, _row("exp", "float32", "forward", 1, 0, 0.75), "t2")], ["s1", "s2"])
  cell = scoreboard_cells(merged)[("exp", "float32", "forward", "CPU")]
  assert (cell["pass"], cell["worst_fraction"]) == (3, 0.75)


def test_scoreboard_of_a_missing_report_is_exit_status_2(tmp_path, capsys):
  assert cli.main(["scoreboard", str(tmp_path / "nowhere")]) == 2
  assert "nowhere" in capsys.readouterr().err


@pytest.mark.parametrize("argv", [["bogus"], [], ["merge", "a", "-o", "b", "--stray"]])
def test_bad_command_lines_are_usage_errors(argv):
  with pytest.raises(SystemExit) as e: cli.main(argv)
  assert e.value.code == 2
