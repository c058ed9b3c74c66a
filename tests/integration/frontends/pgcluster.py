"""A private PostgreSQL server for an integration test (tests/support/pgcluster underneath).

    with pgcluster.PgCluster(env) as pg:
        env.demo_settings(extra=pg.lock_settings())
        pg.stop(); pg.start()      # the same port again
"""

import os
import subprocess

import harness


class PgCluster:
    def __init__(self, env, listen=None):
        """listen: another address to listen on besides 127.0.0.1 (and the unix socket)."""
        self.script = os.path.join(env.source, "tests", "support", "pgcluster")
        self.dir = env.path("pg")
        self.port = harness.free_port()
        self.dsn = None
        self.env = dict(os.environ)
        if listen:
            self.env["KAGI_PG_LISTEN"] = listen

    def __enter__(self):
        out = subprocess.run([self.script, "start", self.dir, str(self.port)], check=True,
                             capture_output=True, text=True, timeout=120, env=self.env)
        self.dsn = out.stdout.strip().splitlines()[-1]
        return self

    def __exit__(self, *exc):
        subprocess.run([self.script, "stop", self.dir], capture_output=True, timeout=60)
        return False

    def stop(self):
        subprocess.run([self.script, "stop", self.dir], check=True, capture_output=True,
                       timeout=60)

    def start(self):
        subprocess.run([self.script, "restart", self.dir], check=True, capture_output=True,
                       timeout=120, env=self.env)

    def processes(self):
        """The postmaster and its children (backends, background workers)."""
        with open(os.path.join(self.dir, "data", "postmaster.pid")) as f:
            master = int(f.readline())
        out = subprocess.run(["pgrep", "-P", str(master)], capture_output=True, text=True)
        return [master] + [int(p) for p in out.stdout.split()]

    def freeze(self, sig):
        """SIGSTOP / SIGCONT every process of the server: a server that stops answering."""
        for pid in self.processes():
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass

    def lock_settings(self, pool=None):
        """--set items for kagi-demo: the postgres lock backend on this server."""
        out = ["locks.backend=postgres", "locks.postgres.dsn=" + self.dsn]
        if pool:
            out.append("locks.postgres.pool=%d" % pool)
        return out

    def sql(self, statement):
        """psql -c, as the cluster's superuser; the output's rows, unaligned."""
        out = subprocess.run(["psql", "-X", "-q", "-A", "-t", "-d", self.dsn, "-c", statement],
                             check=True, capture_output=True, text=True, timeout=30)
        return out.stdout.strip()
