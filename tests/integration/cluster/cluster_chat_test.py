"""One chat room on three web hosts sharing PostgreSQL: a message said on one host wakes the
long-polls parked on every host (LISTEN/NOTIFY), once each, in order.

Three hosts (cluster_common.Cluster: 2 kagi-demo processes × 4 threads each, each process on
a FastCGI socket of its own, locks and data on one private PostgreSQL, one shared secret)
behind ONE nginx with a server per host. Every client talks to one host's server directly,
so the waiters are spread over the hosts by the test, not by a balancer. All clients come
from 127.0.0.1, so chat.max_waiters_per_client (16 a process by default) is raised, and the
say rate limit is off (chat.say_per_minute = 0).

  1. 200 long-polls (wait=30) parked at once, waiter i on host i mod 3; each process's
     /chat/stats.json (asked over its own FastCGI socket) shows them parked, on every host.
     One message said on host1 reaches all 200: p50/p99 delivery latency printed, from the
     say's 200 answer to each waiter's answer (and from the say's request), asserted under a
     sanity bound of 10 s. (A latency from the answer can be below zero: the process that
     says wakes its own waiters before it answers. A warm-up say with nobody waiting comes
     first; its time is printed too.)
  2. The 200 pollers loop (poll, then poll again from the answer's `last`) while 20 messages
     are said one after another on host1, host2, host3, host1... Every poller sees exactly the
     20 acknowledged ids, each once, ascending, without gaps; p50/p99 latency printed.
"""

import asyncio
import json
import time

import cluster_common  # first: it puts frontends/ on the path
import harness  # noqa: E402
import pgcluster  # noqa: E402

chat = cluster_common.load_chat_harness()

ROOM = "lobby"
WAITERS = 200
MESSAGES = 20
SANITY_S = 10.0


class Site:
    def __init__(self, cluster, token):
        self.cluster = cluster
        self.post_headers = {"Cookie": "kagi_csrf=" + token, "X-CSRF-Token": token,
                             "Content-Type": "application/json"}

    async def say(self, host, text):
        """Says `text` on `host`: (id, when the say was sent, when its answer came). The say
        runs in a thread of its own, so its times do not wait for the event loop, which may
        be busy with the waiters' answers."""
        body = json.dumps({"name": "tester", "text": text}).encode()

        def blocking():
            sent = time.monotonic()
            r = harness.request(host.port, "POST", "/chat/%s/say" % ROOM, body,
                                self.post_headers)
            return r, sent, time.monotonic()
        r, sent, answered = await asyncio.get_running_loop().run_in_executor(None, blocking)
        if r.status != 200:
            raise AssertionError("say on %s: HTTP %d %r" % (host.name, r.status, r.body[:200]))
        return json.loads(r.body)["id"], sent, answered

    async def poll(self, host, since, wait):
        status, _, body = await chat.http(host.port, "GET", "/chat/%s/messages?since=%d&wait=%d"
                                          % (ROOM, since, wait))
        if status != 200:
            raise AssertionError("poll on %s: HTTP %d %r" % (host.name, status, body[:200]))
        return json.loads(body)

    def parked(self):
        """{host name: long-polls parked in its processes}."""
        out = {}
        for host in self.cluster.hosts:
            n = 0
            for sock in host.sockets:
                status, body = chat.fcgi_get(sock, "/chat/stats.json")
                if status != 200:
                    raise AssertionError("stats.json on %s: HTTP %d" % (sock, status))
                n += json.loads(body)["parked"]
            out[host.name] = n
        return out


def latency_line(values):
    return "p50 %.1f ms, p99 %.1f ms, max %.1f ms" % (
        cluster_common.percentile(values, 50) * 1000, cluster_common.percentile(values, 99) * 1000,
        max(values) * 1000)


async def park_and_wake(fail, site, hosts):
    _, sent, acked = await site.say(hosts[0], "warm-up, nobody waiting")
    print("  a say with nobody waiting took %.1f ms" % ((acked - sent) * 1000))
    last = (await site.poll(hosts[0], 0, 0))["last"]
    received = {}

    async def waiter(i):
        answer = await site.poll(hosts[i % len(hosts)], last, 30)
        received[i] = (time.monotonic(), answer)

    tasks = [asyncio.create_task(waiter(i)) for i in range(WAITERS)]
    deadline = time.monotonic() + 30
    while sum(site.parked().values()) < WAITERS:
        if time.monotonic() > deadline or any(t.done() for t in tasks):
            raise AssertionError("the %d long-polls did not all park: %r (answered early: %d)"
                                 % (WAITERS, site.parked(), len(received)))
        await asyncio.sleep(0.05)
    parked = site.parked()
    print("  parked per host: %s" % parked)
    fail.check(all(n > 0 for n in parked.values()), "long-polls are parked on every host")
    fail.equal(len(received), 0, "polls answered before any message")

    mid, sent, acked = await site.say(hosts[0], "hello, %d waiters on %d hosts"
                                      % (WAITERS, len(hosts)))
    try:
        await asyncio.wait_for(asyncio.gather(*tasks), 35)
    except asyncio.TimeoutError:
        pass
    wrong = {i: [m["id"] for m in a["messages"]] for i, (_, a) in received.items()
             if [m["id"] for m in a["messages"]] != [mid]}
    fail.equal(len(received), WAITERS, "waiters answered after one say on %s" % hosts[0].name)
    fail.check(not wrong, "every waiter got exactly message %d (wrong: %r)"
               % (mid, dict(list(wrong.items())[:5])))
    by_host = {}
    for i, (t, _) in received.items():
        by_host.setdefault(hosts[i % len(hosts)].name, []).append(t - acked)
    from_ack = [t - acked for t, _ in received.values()]
    from_sent = [t - sent for t, _ in received.values()]
    print("  one message said on %s reached %d waiters: from the say's answer %s; from the "
          "say's request %s (the say itself took %.1f ms)" % (
              hosts[0].name, len(received), latency_line(from_ack), latency_line(from_sent),
              (acked - sent) * 1000))
    for name in sorted(by_host):
        print("    waiters on %s: %s" % (name, latency_line(by_host[name])))
    p99 = cluster_common.percentile(from_ack, 99)
    fail.check(p99 < SANITY_S, "p99 delivery %.1f ms is under the %.0f s sanity bound"
               % (p99 * 1000, SANITY_S))
    return mid


async def say_while_polling(fail, site, hosts, since):
    """The pollers loop while MESSAGES messages are said on the hosts in turn."""
    final = since + MESSAGES  # the room is ours: the says take the next MESSAGES ids
    seen = {i: [] for i in range(WAITERS)}
    arrival = {}  # (poller, id) -> when it arrived

    async def poller(i):
        host, mine = hosts[i % len(hosts)], since
        while mine < final:
            answer = await site.poll(host, mine, 30)
            now = time.monotonic()
            for m in answer["messages"]:
                seen[i].append(m["id"])
                arrival[(i, m["id"])] = now
            mine = max(mine, answer["last"])

    tasks = [asyncio.create_task(poller(i)) for i in range(WAITERS)]
    # Let the pollers park before the first say (not required: one that is late gets the
    # message at once from the room).
    deadline = time.monotonic() + 20
    while sum(site.parked().values()) < WAITERS and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    said, acked_at = [], {}
    t0 = time.monotonic()
    for k in range(MESSAGES):
        host = hosts[k % len(hosts)]
        mid, _, acked_at[mid] = await site.say(host, "message %d from %s" % (k, host.name))
        said.append(mid)
    says_took = time.monotonic() - t0
    done, pending = await asyncio.wait(tasks, timeout=40)
    for t in pending:
        t.cancel()
    errors = [t.exception() for t in done if t.exception() is not None]
    fail.check(not pending and not errors, "every poller finished (%d still waiting, errors %r)"
               % (len(pending), errors[:2]))
    fail.equal(said, list(range(since + 1, final + 1)), "the says' ids")
    bad = {i: ids for i, ids in seen.items() if ids != said}
    fail.check(not bad, "every poller saw every message once, in order, without gaps "
               "(%d did not; e.g. %r)" % (len(bad), list(bad.items())[:2]))
    lat = [arrival[(i, mid)] - acked_at[mid] for i in range(WAITERS) for mid in said
           if (i, mid) in arrival]
    print("  %d messages said on %s in turn in %.2f s while %d pollers looped; delivery from "
          "each say's answer: %s" % (MESSAGES, "/".join(h.name for h in hosts), says_took,
                                     WAITERS, latency_line(lat)))


def test(env, fail):
    with pgcluster.PgCluster(env) as pg, cluster_common.Cluster(env, pg, extra=[
            "chat.max_waiters_per_client=1000", "chat.say_per_minute=0"]) as cluster:
        hosts = cluster.hosts
        site = Site(cluster, cluster_common.csrf_token(hosts[0].port, "/chat/"))
        mid = asyncio.run(park_and_wake(fail, site, hosts))
        asyncio.run(say_while_polling(fail, site, hosts, mid))


if __name__ == "__main__":
    import resource
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, 8192)), hard))
    harness.main(test, "cluster-chat")
