"""A TCP server that speaks NCCL RAS's client protocol (NCCL src/ras/client_support.cc: "CLIENT PROTOCOL n"
-> "SERVER PROTOCOL 2", "TIMEOUT s" -> "OK", "SET FORMAT json" -> "OK", "[VERBOSE ]STATUS" -> the report, then
the connection closed) and answers with a RECORDED report (tests/fixtures/deadlink/ras): the one boundary of
the RAS tests, as NVML's recorded readings are for the GPU tests; NCCL itself cannot run here (no GPU).

``json_text`` None plays an NCCL older than 2.28.7: "SET FORMAT json" is answered "ERROR: Unknown command ..."
and the connection stays open, as NCCL does. ``mode``: "answer"; "stall" (reads the commands, never answers);
"flood" (answers STATUS with ``flood_bytes`` of filler); "partial" (sends the first half of the report, then
stalls); "http" (says something that is not RAS).
"""

from __future__ import annotations

import socket
import threading


class RasReplay:
    def __init__(self, text: str | None = None, json_text: str | None = None, mode: str = "answer",
                 flood_bytes: int = 8 << 20) -> None:
        self.text, self.json_text, self.mode, self.flood_bytes = text, json_text, mode, flood_bytes
        self.commands: list[str] = []
        self.sent = 0
        self._stop = threading.Event()
        self._sock = socket.create_server(("127.0.0.1", 0))
        self._sock.settimeout(0.1)
        self.port = self._sock.getsockname()[1]
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    @property
    def addr(self) -> str:
        return f"127.0.0.1:{self.port}"

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)
        self._sock.close()

    def __enter__(self) -> RasReplay:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._sock.accept()
            except TimeoutError:
                continue
            with conn:
                conn.settimeout(0.1)
                self._talk(conn)

    def _lines(self, conn: socket.socket):
        buf = b""
        while not self._stop.is_set():
            while b"\n" in buf:
                line, _, buf = buf.partition(b"\n")
                yield line.decode().strip()
            try:
                chunk = conn.recv(4096)
            except TimeoutError:
                continue
            except OSError:
                return
            if not chunk:
                return
            buf += chunk

    def _talk(self, conn: socket.socket) -> None:
        fmt = "text"
        for cmd in self._lines(conn):
            self.commands.append(cmd)
            up = cmd.upper()
            if self.mode == "stall":
                continue
            if self.mode == "http":
                conn.sendall(b"HTTP/1.1 400 Bad Request\r\n\r\n")
                return
            if up.startswith("CLIENT PROTOCOL "):
                conn.sendall(b"SERVER PROTOCOL 2\n")
            elif up.startswith("TIMEOUT "):
                conn.sendall(b"OK\n")
            elif up == "SET FORMAT JSON" and self.json_text is not None:
                fmt = "json"
                conn.sendall(b"OK\n")
            elif up in ("STATUS", "VERBOSE STATUS"):
                self._report(conn, self.json_text if fmt == "json" else self.text)
                return
            else:
                conn.sendall(f"ERROR: Unknown command {cmd}\n".encode())

    def _report(self, conn: socket.socket, report: str | None) -> None:
        data = (report or "").encode()
        try:
            if self.mode == "flood":
                filler = b"x" * 65536
                while self.sent < self.flood_bytes and not self._stop.is_set():
                    conn.sendall(filler)
                    self.sent += len(filler)
            elif self.mode == "partial":
                conn.sendall(data[:len(data) // 2])
                self.sent = len(data) // 2
                self._stop.wait()
            else:
                conn.sendall(data)
                self.sent = len(data)
        except OSError:
            return  # the client went away (it had enough): as NCCL's send would see it
