"""`python -m refimpl.viz DIR [--port N]`: serve the VIZ bundles of DIR on 127.0.0.1 (DEV.VIZ.serve)."""
import argparse
from pathlib import Path

from refimpl.viz import DEFAULT_PORT, serve


def main() -> None:
  parser = argparse.ArgumentParser(prog="python -m refimpl.viz", description="serve the VIZ explorer of DIR's bundles")
  parser.add_argument("directory", type=Path, help="a directory of *.viz.json bundles (VIZ=DIR, --viz-dir DIR)")
  parser.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"port on 127.0.0.1 (default {DEFAULT_PORT})")
  args = parser.parse_args()
  if not args.directory.is_dir(): parser.error(f"{args.directory} is not a directory")
  serve(args.directory, args.port)


if __name__ == "__main__":
  main()
