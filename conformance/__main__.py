"""`python -m conformance grade path/to/ops.py`: grade contributed ops (conformance/grade.py).
`python -m conformance merge DIR1 DIR2 ... -o OUT`: merge the reports of several runs (conformance/report.py)."""
from __future__ import annotations

import argparse
import sys

USAGE = ("usage: python -m conformance grade path/to/ops.py [--backend PYTHON] [--profile ci] [--out DIR]\n"
         "       python -m conformance merge DIR1 DIR2 ... -o OUT [--partial]")


def merge_main(argv: list[str]) -> int:
  """CONF.REPORT.merge: read DIR/conformance.json of each run (one per backend or implementation) and write
  OUT/conformance.json and OUT/coverage.md, the clause-coverage table over all of them."""
  parser = argparse.ArgumentParser(prog="python -m conformance merge",
                                   description="Merge the --report-dir reports of several conformance runs.")
  parser.add_argument("dirs", nargs="+", help="report directories, each with a conformance.json")
  parser.add_argument("-o", "--out", required=True, help="directory for the merged conformance.json and coverage.md")
  parser.add_argument("--partial", action="store_true",
                      help="join the shards there are of a sharded run, not all N (CONF.SHARD.join)")
  args = parser.parse_args(argv)
  from conformance.report import write_merged
  try: merged = write_merged(args.dirs, args.out, args.partial)
  except (OSError, ValueError) as e:   # a missing directory or a file that is not a run's report
    print(f"merge: {e}", file=sys.stderr)
    return 2
  print(f"merged {len(merged['runs'])} runs ({', '.join(r['label'] for r in merged['runs'])}) into "
        f"{args.out}/conformance.json and {args.out}/coverage.md")
  return 0


def main(argv: list[str]) -> int:
  """Dispatch the subcommand."""
  if argv and argv[0] == "grade":
    from conformance.grade import main as grade_main
    return grade_main(argv[1:])
  if argv and argv[0] == "merge": return merge_main(argv[1:])
  print(USAGE, file=sys.stderr)
  return 2


if __name__ == "__main__":
  sys.exit(main(sys.argv[1:]))
