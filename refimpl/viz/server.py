"""The explorer's web server (DEV.VIZ.serve): the standard library's http.server on 127.0.0.1, serving the page
(refimpl/viz/static, written for this project, nothing fetched at run time) and the bundles of one directory.

  GET /                  the page
  GET /static/NAME       its script and style
  GET /api/bundles       the names of the directory's *.viz.json files, newest first
  GET /api/bundle/NAME   one bundle"""
from __future__ import annotations

import json
import threading
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

STATIC = Path(__file__).resolve().parent / "static"
_TYPES = {".html": "text/html; charset=utf-8", ".js": "text/javascript; charset=utf-8",
          ".css": "text/css; charset=utf-8"}


def bundles(directory: Path) -> list[str]:
  """The bundle files of `directory`, newest first."""
  return [p.name for p in sorted(directory.glob("*.viz.json"), key=lambda p: -p.stat().st_mtime)]


class Handler(SimpleHTTPRequestHandler):
  directory_of_bundles: Path = Path(".")

  def do_GET(self) -> None:
    path = self.path.split("?", 1)[0].split("#", 1)[0]
    if path in ("/", "/index.html"): return self._file(STATIC / "index.html")
    if path.startswith("/static/"): return self._file(STATIC / Path(path).name)
    if path == "/api/bundles": return self._send(json.dumps(bundles(self.directory_of_bundles)).encode(), ".json")
    if path.startswith("/api/bundle/"):
      name = Path(path).name   # a bare file name: nothing outside the directory is served
      if name.endswith(".viz.json"): return self._file(self.directory_of_bundles / name)
    self.send_error(404, "not found")

  def _file(self, path: Path) -> None:
    if not path.is_file(): return self.send_error(404, "not found")
    self._send(path.read_bytes(), path.suffix)

  def _send(self, body: bytes, suffix: str) -> None:
    self.send_response(200)
    self.send_header("Content-Type", _TYPES.get(suffix, "application/json"))
    self.send_header("Content-Length", str(len(body)))
    self.send_header("Cache-Control", "no-store")
    self.end_headers()
    self.wfile.write(body)

  def log_message(self, *args) -> None: pass   # quiet: the URL is printed once, requests are not


def make_server(directory: str | Path, port: int = 0, host: str = "127.0.0.1") -> ThreadingHTTPServer:
  """A server of `directory`'s bundles on host:port (port 0: a free one); `server.server_address` says which."""
  handler = type("BundleHandler", (Handler,), {"directory_of_bundles": Path(directory)})
  return ThreadingHTTPServer((host, port), handler)


def serve_in_thread(directory: str | Path, port: int = 0) -> tuple[ThreadingHTTPServer, str]:
  """Start a server in a daemon thread; (server, its URL). `server.shutdown()` stops it."""
  server = make_server(directory, port)
  threading.Thread(target=server.serve_forever, daemon=True).start()
  return server, url_of(server)


def url_of(server: ThreadingHTTPServer) -> str:
  host, port = server.server_address[:2]
  return f"http://{host}:{port}/"
