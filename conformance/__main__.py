"""`python -m conformance grade path/to/ops.py`: grade contributed ops (conformance/grade.py)."""
from __future__ import annotations

import sys

USAGE = "usage: python -m conformance grade path/to/ops.py [--backend PYTHON] [--profile ci] [--out DIR]"


def main(argv: list[str]) -> int:
  """Dispatch the subcommand."""
  if not argv or argv[0] != "grade":
    print(USAGE, file=sys.stderr)
    return 2
  from conformance.grade import main as grade_main
  return grade_main(argv[1:])


if __name__ == "__main__":
  sys.exit(main(sys.argv[1:]))
