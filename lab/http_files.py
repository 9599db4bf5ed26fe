"""A folder served over HTTP on localhost, with byte ranges, as object stores serve files.

Why: the standard library's file server ignores Range headers and sends the whole file, so a
reader that asks for one TIFF tile would get the whole image; an object store (S3, GCS, any
static web server) answers ranges with 206 and only those bytes.
"""
from __future__ import annotations

import contextlib
import functools
import os
import re
import threading
from collections.abc import Iterator
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

_RANGE = re.compile(r"bytes=(\d+)-(\d*)$")


class RangeHandler(SimpleHTTPRequestHandler):
    """The standard file handler, quiet, plus single byte ranges (206, or 416 past the end)."""

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base's name
        pass

    def end_headers(self) -> None:
        self.send_header("Accept-Ranges", "bytes")
        super().end_headers()

    def do_GET(self) -> None:
        match = _RANGE.match(self.headers.get("Range", "").strip())
        path = self.translate_path(self.path)
        if match is None or not os.path.isfile(path):
            super().do_GET()
            return
        size = os.path.getsize(path)
        start = int(match.group(1))
        end = min(size - 1, int(match.group(2))) if match.group(2) else size - 1
        if start >= size or end < start:
            self.send_response(416)
            self.send_header("Content-Range", f"bytes */{size}")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        with open(path, "rb") as f:
            f.seek(start)
            body = f.read(end - start + 1)
        self.send_response(206)
        self.send_header("Content-Type", self.guess_type(path))
        self.send_header("Content-Range", f"bytes {start}-{end}/{size}")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@contextlib.contextmanager
def served(folder: Path) -> Iterator[str]:
    """`folder` served over HTTP on localhost while the block runs; its base URL."""
    server = ThreadingHTTPServer(("127.0.0.1", 0),
                                 functools.partial(RangeHandler, directory=str(folder)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
