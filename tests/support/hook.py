"""A webhook receiver for lab tests: `python hook.py PORT FILE` answers every POST 200 and appends its
JSON body as one line to FILE; it writes FILE.ready once it listens. Runs inside a lab namespace."""

from __future__ import annotations

import json
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path


def main(port: int, out: Path) -> None:
    class Hook(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            with out.open("a", encoding="utf-8") as f:
                f.write(json.dumps(json.loads(body)) + "\n")
            self.send_response(200)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"{}")

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", port), Hook)
    Path(f"{out}.ready").touch()
    server.serve_forever()


if __name__ == "__main__":
    main(int(sys.argv[1]), Path(sys.argv[2]))
