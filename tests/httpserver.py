"""A small real HTTP file server for download tests, on 127.0.0.1 in a thread of the test process.

It serves the files under `root` with HEAD, GET and Range requests (206 answers), and can misbehave
on demand: answer the next GETs of a path with an error status (`fail_next`), always fail
(`always_fail`), stall before answering (`stall_next`), or send bodies slowly (`rate`, bytes per
second). Every GET is logged with what was sent, so tests can count requests and bytes.

    with FileServer(tmp_path) as server:
        server.fail_next("data/a.parquet", 503, times=2)
        url = server.url("data/a.parquet")
"""
from __future__ import annotations

import hashlib
import re
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

CHUNK = 16 * 1024


@dataclass
class Served:
    path: str
    range: str | None
    status: int
    sent: int
    complete: bool
    began: float = 0.0   # time.monotonic() when the request arrived
    ended: float = 0.0   # ... and when its answer was sent


class FileServer:
    def __init__(self, root: Path):
        self.root = Path(root)
        self.rate: float | None = None
        self.always_fail: int | None = None
        self.log: list[Served] = []
        self._fail: dict[str, list[int]] = {}
        self._stall: dict[str, list[float]] = {}
        self._lock = threading.Lock()
        self._httpd: ThreadingHTTPServer | None = None

    # -- misbehaviour --------------------------------------------------------------------------
    def fail_next(self, path: str, status: int = 503, times: int = 1) -> None:
        with self._lock:
            self._fail.setdefault(path, []).extend([status] * times)

    def stall_next(self, path: str, seconds: float, times: int = 1) -> None:
        with self._lock:
            self._stall.setdefault(path, []).extend([seconds] * times)

    # -- what happened -------------------------------------------------------------------------
    def gets(self, path: str | None = None) -> list[Served]:
        with self._lock:
            return [s for s in self.log if path is None or s.path == path]

    def bytes_sent(self, path: str) -> int:
        return sum(s.sent for s in self.gets(path) if s.status in (200, 206))

    # -- life ----------------------------------------------------------------------------------
    def url(self, path: str) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}/{path}"

    def start(self) -> "FileServer":
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:  # quiet
                pass

            def do_HEAD(self) -> None:
                self._answer(body=False)

            def do_GET(self) -> None:
                self._answer(body=True)

            def _answer(self, body: bool) -> None:
                rel = self.path.lstrip("/").split("?", 1)[0]
                began = time.monotonic()
                with server._lock:
                    stall = server._stall[rel].pop(0) if body and server._stall.get(rel) else 0.0
                    fail = server._fail[rel].pop(0) if body and server._fail.get(rel) else server.always_fail
                if stall:
                    time.sleep(stall)
                file = server.root / rel
                if fail is not None or not file.is_file():
                    status = fail if fail is not None else 404
                    message = b"injected failure\n" if fail is not None else b"not found\n"
                    self.send_response(status)
                    self.send_header("Content-Length", str(len(message)))
                    self.end_headers()
                    if body:
                        self._write(message)
                        server._record(Served(rel, self.headers.get("Range"), status, 0, True, began, time.monotonic()))
                    return
                data = file.read_bytes()
                start, end, status = 0, len(data), 200
                wanted = self.headers.get("Range")
                match = re.fullmatch(r"bytes=(\d*)-(\d*)", wanted or "")
                if match and (match[1] or match[2]):
                    if match[1]:
                        start = int(match[1])
                        end = min(len(data), int(match[2]) + 1) if match[2] else len(data)
                    else:
                        start = max(0, len(data) - int(match[2]))
                    status = 206
                self.send_response(status)
                self.send_header("Content-Length", str(end - start))
                self.send_header("Accept-Ranges", "bytes")
                self.send_header("ETag", '"' + hashlib.md5(data).hexdigest() + '"')
                if status == 206:
                    self.send_header("Content-Range", f"bytes {start}-{end - 1}/{len(data)}")
                self.end_headers()
                if not body:
                    return
                sent, complete = 0, True
                for offset in range(start, end, CHUNK):
                    piece = data[offset:min(end, offset + CHUNK)]
                    if not self._write(piece):
                        complete = False
                        break
                    sent += len(piece)
                    if server.rate:
                        time.sleep(len(piece) / server.rate)
                server._record(Served(rel, wanted, status, sent, complete, began, time.monotonic()))

            def _write(self, data: bytes) -> bool:
                try:
                    self.wfile.write(data)
                    self.wfile.flush()
                    return True
                except (BrokenPipeError, ConnectionResetError):
                    self.close_connection = True
                    return False

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self._httpd.block_on_close = False
        threading.Thread(target=self._httpd.serve_forever, args=(0.05,), name="test-http", daemon=True).start()
        return self

    def _record(self, served: Served) -> None:
        with self._lock:
            self.log.append(served)

    def stop(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None

    def __enter__(self) -> "FileServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
