"""A minimal FastCGI client (the web server's side of the protocol) for the tests: lets a
test hold kept connections open, send bodies without CONTENT_LENGTH, and vanish
mid-response in ways nginx and Apache would hide."""

import socket
import struct

VERSION = 1
BEGIN_REQUEST, ABORT_REQUEST, END_REQUEST, PARAMS, STDIN, STDOUT, STDERR = 1, 2, 3, 4, 5, 6, 7
RESPONDER = 1
KEEP_CONN = 1


def _record(rtype, request_id, content=b""):
    pad = (8 - len(content) % 8) % 8
    return struct.pack("!BBHHBx", VERSION, rtype, request_id, len(content), pad) + content + b"\0" * pad


def _length(n):
    return struct.pack("!B", n) if n < 128 else struct.pack("!I", n | 0x80000000)


def _params(pairs):
    out = b""
    for name, value in pairs.items():
        n, v = name.encode(), value.encode()
        out += _length(len(n)) + _length(len(v)) + n + v
    return out


class Response:
    def __init__(self, status, headers, body):
        self.status, self.headers, self.body = status, headers, body

    def header(self, name):
        for k, v in self.headers:
            if k.lower() == name.lower():
                return v
        return None


def request_bytes(method, uri, body=b"", headers=None, keep=True, content_length=True,
                  request_id=1):
    """The records of one request, as Conn.send_request sends them."""
    params = {
        "REQUEST_METHOD": method,
        "REQUEST_URI": uri,
        "QUERY_STRING": uri.partition("?")[2],
        "SERVER_PROTOCOL": "HTTP/1.1",
        "REMOTE_ADDR": "192.0.2.7",
        "SERVER_NAME": "localhost",
        "SERVER_PORT": "80",
    }
    if content_length and body:
        params["CONTENT_LENGTH"] = str(len(body))
    for name, value in (headers or {}).items():
        key = name.upper().replace("-", "_")
        if key not in ("CONTENT_TYPE", "CONTENT_LENGTH"):
            key = "HTTP_" + key
        params[key] = value
    data = _record(BEGIN_REQUEST, request_id,
                   struct.pack("!HB5x", RESPONDER, KEEP_CONN if keep else 0))
    data += _record(PARAMS, request_id, _params(params)) + _record(PARAMS, request_id)
    for i in range(0, len(body), 65535):
        data += _record(STDIN, request_id, body[i:i + 65535])
    data += _record(STDIN, request_id)
    return data


class Conn:
    def __init__(self, address, timeout=10.0, rcvbuf=None):
        family = socket.AF_UNIX if isinstance(address, str) else socket.AF_INET
        self.sock = socket.socket(family, socket.SOCK_STREAM)
        if rcvbuf:  # before connect: a small window makes the server's writes back up
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        self.sock.settimeout(timeout)
        self.sock.connect(address)
        self.buf = b""

    def close(self):
        self.sock.close()

    def send_request(self, method, uri, body=b"", headers=None, keep=True, content_length=True,
                     request_id=1):
        self.sock.sendall(request_bytes(method, uri, body, headers, keep, content_length,
                                        request_id))

    def _read(self, n):
        while len(self.buf) < n:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("connection closed by kagi")
            self.buf += chunk
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def read_response(self):
        stdout = b""
        while True:
            _, rtype, _, length, pad = struct.unpack("!BBHHBx", self._read(8))
            content = self._read(length)
            self._read(pad)
            if rtype == STDOUT:
                stdout += content
            elif rtype == END_REQUEST:
                break
        head, _, body = stdout.partition(b"\r\n\r\n")
        headers = []
        status = 200
        for line in head.decode(errors="replace").split("\r\n"):
            name, _, value = line.partition(":")
            headers.append((name.strip(), value.strip()))
            if name.lower() == "status":
                status = int(value.split()[0])
        return Response(status, headers, body)

    def request(self, method, uri, body=b"", headers=None, keep=True, content_length=True):
        self.send_request(method, uri, body, headers, keep, content_length)
        return self.read_response()
