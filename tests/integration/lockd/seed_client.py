"""A lock client that speaks exactly the bytes of the classic PHP client of such servers (the
seed's SendaiLock class): one TCP connection, "LOCK <key>\\n" written once, one answer read
the way PHP's socket_read(..., PHP_NORMAL_READ) reads it (byte by byte, up to and including
the first '\\n' or '\\r'), and the lock held until the connection closes. Nothing else is sent.

    python3 seed_client.py PORT KEY

Prints "read <answer bytes as hex> <CLOCK_MONOTONIC ns>" once the answer is in, then reads
stdin: "close" closes the connection (prints "closed <ns>", the time just before the close);
end of input exits.
"""

import socket
import sys
import time

port, key = int(sys.argv[1]), sys.argv[2].encode()
s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
s.connect(("127.0.0.1", port))
s.send(b"LOCK " + key + b"\n")
answer = b""
while True:
    c = s.recv(1)
    if not c:
        break
    answer += c
    if c in (b"\n", b"\r"):
        break
print("read %s %d" % (answer.hex(), time.monotonic_ns()), flush=True)
for line in sys.stdin:
    if line.strip() == "close":
        before = time.monotonic_ns()
        s.close()
        print("closed %d" % before, flush=True)
