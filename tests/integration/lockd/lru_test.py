"""The seed's LRU double grant cannot happen here. The seed's server keeps one lock object per
key in an LRU map of 1,000 entries; a key held for long is the least recently used one after
1,000 other keys, so its object is evicted while held, and the next client asking for that key
gets a new object and the lock, while the first still holds it. Here a key's state lives as
long as someone holds or waits for it, whatever happens to other keys:

  A holds "lru/held" (the seed's form); B locks and releases 10,000 other keys on one
  connection; C asks for "lru/held" and must still be waiting; when A closes, C gets it.

Meanwhile kagi-locks --lockd shows A holding and C waiting, each with its client address.

    python3 lru_test.py --lockd BUILD/apps/lockd/kagi-lockd
"""

import json
import os
import select
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from lockd_harness import Checks, Lockd, call, connect, parse_args, read_line, status  # noqa: E402

OTHER_KEYS = 10_000


def main():
    args = parse_args()
    checks = Checks()
    with Lockd(args.lockd) as server:
        a = connect(server.port)
        checks.check(call(a, b"LOCK lru/held") == b"ok", "A holds lru/held")
        b = connect(server.port)
        granted = 0
        batch = 100  # pipelined: uncontended, so no line waits behind another
        for start in range(0, OTHER_KEYS, batch):
            b.sendall(b"".join(b"LOCK lru/other/%d\nUNLOCK\n" % i
                               for i in range(start, start + batch)))
            for _ in range(batch):
                granted += read_line(b) == b"ok"
                read_line(b)
        checks.check(granted == OTHER_KEYS, "B locked and released %d other keys (%d granted)" %
                     (OTHER_KEYS, granted))
        c = connect(server.port)
        c.sendall(b"LOCK lru/held\n")
        ready, _, _ = select.select([c], [], [], 0.5)
        checks.check(not ready, "C asking for lru/held is still waiting after 0.5 s")
        lines = status(server.port)
        checks.check(len(lines) == 1 and b'"waiting_ms"' in lines[0] and b"lru/held" in lines[0],
                     "STATUS shows one key (lru/held: A holding, C waiting), none of the 10,000 "
                     "released ones")
        if args.locks:
            where = ["--set", "locks.dir=" + tempfile.mkdtemp(prefix="kagi-locks-")]
            lockd = ["--lockd", "127.0.0.1:%d" % server.port]
            text = subprocess.run([args.locks, *where, *lockd], capture_output=True,
                                  text=True).stdout
            a_addr = "127.0.0.1:%d" % a.getsockname()[1]
            c_addr = "127.0.0.1:%d" % c.getsockname()[1]
            checks.check("across hosts (kagi-lockd)" in text and "from " + a_addr in text and
                         "from " + c_addr in text,
                         "kagi-locks --lockd shows the holder and the waiter with their addresses:"
                         "\n" + text)
            doc = json.loads(subprocess.run([args.locks, *where, *lockd, "--json"],
                                            capture_output=True, text=True).stdout)
            row = doc["cluster"]["locks"][0]
            checks.check(doc["cluster"]["backend"] == "lockd" and row["name"] == "lru/held" and
                         row["holders"][0]["client_address"] == a_addr and
                         row["waiters"][0]["client_address"] == c_addr,
                         "kagi-locks --json: cluster.locks has lru/held with both addresses")
        a.close()
        c.settimeout(5)
        checks.check(read_line(c) == b"ok", "C is granted lru/held once A closes")
    checks.finish()


if __name__ == "__main__":
    main()
