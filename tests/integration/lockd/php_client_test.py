"""Runs clients/php/tests/KagiLockTest.php (php8.2-cli) against a real kagi-lockd on TCP and
on a unix socket, and a second one whose idle timeout is short (an idle connection the server
closes is replaced).

    python3 php_client_test.py --lockd BUILD/apps/lockd/kagi-lockd --source SRC [--php php]
"""

import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from lockd_harness import Lockd, parse_args  # noqa: E402


def main():
    args = parse_args()
    with Lockd(args.lockd) as server, \
            Lockd(args.lockd, ["--set", "lockd.idle_timeout_ms=500"]) as short_idle:
        code = subprocess.call([args.php, os.path.join(args.source, "clients", "php", "tests",
                                                       "KagiLockTest.php"),
                                "127.0.0.1:%d" % server.port, "unix:" + server.unix_path,
                                "127.0.0.1:%d" % short_idle.port], timeout=120)
    sys.exit(code)


if __name__ == "__main__":
    main()
