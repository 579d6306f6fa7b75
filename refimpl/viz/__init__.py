"""VIZ (spec/backends.md, DEV.VIZ): see every rewrite the compiler made, with the spec clause that allowed it.

`VIZ=1 python prog.py` records every graph_rewrite of the run (refimpl/uop/capture.py) and, at the end of the run,
writes a bundle (bundle.py) and serves the explorer on 127.0.0.1, printing its URL, until Ctrl-C (DEV.VIZ.serve).
When the run's output is not a terminal (a test, CI), or `VIZ=DIR` names a directory, the bundle is written and its
path printed instead; `python -m refimpl.viz DIR` serves it later."""
from __future__ import annotations

import atexit
import os
import sys
import tempfile
from pathlib import Path

from refimpl.helpers import knob
from refimpl.uop import capture

__all__ = ["install_from_environment", "finish", "serve"]
DEFAULT_PORT = 8000


def install_from_environment() -> None:
  """With VIZ set (DEV.KNOBS), start recording now and write or serve the bundle when the program exits."""
  if not knob("VIZ") or capture.recorder is not None: return
  capture.start()
  atexit.register(finish)


def finish() -> Path | None:
  """Stop recording; write the bundle to VIZ=DIR (or a new temporary directory for VIZ=1) and serve it when VIZ=1
  and the output is a terminal, else print where it is (DEV.VIZ.serve)."""
  rec = capture.stop()
  if rec is None: return None
  setting = knob("VIZ")
  directory = Path(setting) if isinstance(setting, str) else Path(tempfile.mkdtemp(prefix="tinyspec-viz-"))
  from refimpl.viz.bundle import write
  script = Path(sys.argv[0] or "python")
  name = script.parent.name if script.stem == "__main__" else script.stem   # `python -m pytest`: "pytest"
  path = write(rec.to_json(), directory, f"{name}-{os.getpid()}", " ".join(sys.argv))
  if setting == 1 and sys.stdout.isatty() and sys.stdin.isatty(): serve(directory)
  else: print(f"VIZ: bundle written to {path}; serve it with: python -m refimpl.viz {directory}", file=sys.stderr)
  return path


def serve(directory: str | Path, port: int = DEFAULT_PORT) -> None:
  """Serve the explorer of `directory`'s bundles on 127.0.0.1 until Ctrl-C (another free port when `port` is
  taken), printing its URL."""
  from refimpl.viz.server import make_server, url_of
  try: server = make_server(directory, port)
  except OSError: server = make_server(directory, 0)
  print(f"VIZ: explorer at {url_of(server)} (Ctrl-C to stop)", flush=True)
  try: server.serve_forever()
  except KeyboardInterrupt: pass
  finally: server.server_close()
