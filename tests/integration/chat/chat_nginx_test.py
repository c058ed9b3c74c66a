#!/usr/bin/env python3
"""The chat behind real nginx: 2 kagi-demo processes × server.threads=4 (issue 6).

  usage: chat_nginx_test.py KAGI_DEMO SOURCE_DIR [phase...]
  phases: api park200 exactly_once disconnect (default: all, in that order)

park200       200 clients long-poll a room at once (more than the 8 worker threads: a parked
              request holds no thread); meanwhile other pages answer (printed against 1 s,
              asserted under a generous 5 s: the machine may be loaded); one message then
              reaches all 200 (p99 printed against 2 s, asserted under 10 s), whichever
              process parked them. Latency goals belong to scripts/bench.
exactly_once  32 clients say 200 messages each at once; a client polling from 0 gets every
              acknowledged id exactly once, in id order, none lost.
disconnect    10,000 clients disconnect while parked: every parked entry is freed in both
              processes (their counters), and fd count and RSS return near the baseline.

api           form and JSON says, the no-JavaScript 303, 400/403/404 answers, presence.

Prints one line per measurement; exits 1 on the first failed check.
"""

import asyncio
import json
import os
import re
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import check, http, percentile, run_site, wait_until  # noqa: E402

ROOM = "lobby"
# The CSRF token: one the site signed (fetch_token), sent as cookie and header by every post.
TOKEN = ""
POST_HEADERS = {}


def fetch_token(site):
    global TOKEN, POST_HEADERS
    status, headers, _ = asyncio.run(http(site.port, "GET", "/chat/"))
    m = re.search(r"kagi_csrf=([0-9a-f]+)", headers.get("set-cookie", ""))
    check(status == 200 and m, "GET /chat/ sets a kagi_csrf cookie: %d %r" % (status, headers))
    TOKEN = m.group(1)
    POST_HEADERS = {"Cookie": "kagi_csrf=" + TOKEN, "X-CSRF-Token": TOKEN,
                    "Content-Type": "application/json"}


def process_stats(site):
    return site.each_process_json("/chat/stats.json")


def parked(site):
    return sum(s["parked"] for s in process_stats(site))


async def say(port, text, name="tester"):
    body = json.dumps({"name": name, "text": text}).encode()
    status, _, out = await http(port, "POST", "/chat/%s/say" % ROOM, POST_HEADERS, body)
    check(status == 200, "say: HTTP %d %r" % (status, out[:200]))
    return json.loads(out)["id"]


async def poll(port, since, wait):
    status, headers, body = await http(port, "GET", "/chat/%s/messages?since=%d&wait=%d" %
                                       (ROOM, since, wait))
    check(status == 200, "messages: HTTP %d %r" % (status, body[:200]))
    return json.loads(body)


def phase_park200(site):
    port = site.port
    last = asyncio.run(poll(port, 0, 0))["last"]

    async def run():
        received = {}

        async def waiter(i):
            answer = await poll(port, last, 30)
            received[i] = (time.monotonic(), answer)

        tasks = [asyncio.create_task(waiter(i)) for i in range(200)]
        # All 200 parked, in the two processes together: more than the 8 worker threads.
        while parked(site) < 200:
            check(time.monotonic() - t_start < 20, "200 long-polls did not all park")
            await asyncio.sleep(0.05)
        per_process = [s["parked"] for s in process_stats(site)]
        print("park200: parked per process %s" % per_process)

        # Other pages answer promptly while they wait.
        times = []
        for path in ["/chat/", "/chat/%s/" % ROOM, "/chat/%s/who" % ROOM] * 10:
            t = time.monotonic()
            status, _, _ = await http(port, "GET", path)
            times.append(time.monotonic() - t)
            check(status == 200, "%s: HTTP %d while 200 polls wait" % (path, status))
        print("park200: other pages while parked: max %.1f ms, p50 %.1f ms (goal: max under 1 s)"
              % (max(times) * 1000, percentile(times, 50) * 1000))
        check(max(times) < 5.0, "a page took %.2f s while 200 polls waited" % max(times))
        check(len(received) == 0, "a parked poll was answered before any message")

        t0 = time.monotonic()
        mid = await say(port, "hello, 200 waiters")
        await asyncio.wait_for(asyncio.gather(*tasks), 30)
        latencies = []
        for i, (t, answer) in received.items():
            ids = [m["id"] for m in answer["messages"]]
            check(ids == [mid], "waiter %d got %r, expected [%d]" % (i, ids, mid))
            latencies.append(t - t0)
        p99 = percentile(latencies, 99)
        print("park200: one message reached %d waiters: p50 %.1f ms, p99 %.1f ms, max %.1f ms "
              "(goal: p99 under 2 s)" % (len(latencies), percentile(latencies, 50) * 1000,
                                         p99 * 1000, max(latencies) * 1000))
        check(len(latencies) == 200, "only %d of 200 waiters answered" % len(latencies))
        check(p99 < 10.0, "p99 delivery %.2f s is over the 10 s sanity bound" % p99)

    t_start = time.monotonic()
    asyncio.run(run())


def phase_exactly_once(site, clients=32, each=200):
    port = site.port

    async def run():
        acked = []
        seen = []
        done = asyncio.Event()

        async def sayer(c):
            for k in range(each):
                acked.append(await say(port, "c%d m%d" % (c, k), "c%d" % c))

        async def poller():
            since = 0
            while True:
                answer = await poll(port, since, 5)
                ids = [m["id"] for m in answer["messages"]]
                check(ids == sorted(ids), "a batch out of order: %r" % ids[:20])
                check(not ids or ids[0] > since, "a batch repeats id %d" % since)
                seen.extend(ids)
                since = answer["last"]
                if done.is_set() and acked and since >= max(acked):
                    return

        t0 = time.monotonic()
        poll_task = asyncio.create_task(poller())
        await asyncio.gather(*(sayer(c) for c in range(clients)))
        elapsed = time.monotonic() - t0
        done.set()
        await asyncio.wait_for(poll_task, 30)
        print("exactly_once: %d clients said %d messages in %.1f s (%.0f say/s)" %
              (clients, len(acked), elapsed, len(acked) / elapsed))
        check(len(acked) == clients * each, "acknowledged %d of %d" % (len(acked), clients * each))
        check(len(set(acked)) == len(acked), "an id was acknowledged twice")
        check(seen == sorted(seen), "the poller saw ids out of order")
        check(len(set(seen)) == len(seen), "the poller saw an id twice")
        missing = set(acked) - set(seen)
        check(not missing, "%d acknowledged messages never delivered, e.g. %r" %
              (len(missing), sorted(missing)[:10]))
        print("exactly_once: all %d acknowledged ids delivered once, in order" % len(acked))

    asyncio.run(run())


def phase_api(site):
    """The API's edges: form and JSON says, the no-JavaScript form, errors, presence."""
    port = site.port
    form = {"Cookie": "kagi_csrf=" + TOKEN, "Content-Type": "application/x-www-form-urlencoded"}

    async def run():
        body = ("name=form+user&text=hi+from+a+form&_csrf=" + TOKEN).encode()
        status, _, out = await http(port, "POST", "/chat/%s/say" % ROOM, form, body)
        check(status == 200 and "id" in json.loads(out), "form say: %d %r" % (status, out))
        status, headers, _ = await http(port, "POST", "/chat/%s/say" % ROOM,
                                        dict(form, Accept="text/html,*/*"), body)
        check(status == 303 and headers.get("location", "").startswith("/chat/%s/" % ROOM),
              "a browser form gets 303 back to the room, got %d" % status)
        for bad, want in [(b'{"name":"a","text":1}', 400), (b'{"text":"x"} junk', 400),
                          (b'{"name":"a","text":"   "}', 400)]:
            status, _, out = await http(port, "POST", "/chat/%s/say" % ROOM, POST_HEADERS, bad)
            check(status == want, "%r: HTTP %d, expected %d" % (bad, status, want))
        no_token = dict(POST_HEADERS)
        del no_token["X-CSRF-Token"]
        status, _, _ = await http(port, "POST", "/chat/%s/say" % ROOM, no_token, b'{"text":"x"}')
        check(status == 403, "a say without X-CSRF-Token: HTTP %d" % status)
        status, _, _ = await http(port, "GET", "/chat/nosuch/messages?since=0")
        check(status == 404, "an unknown room: HTTP %d" % status)
        status, _, _ = await http(port, "GET", "/chat/%s/messages?since=-1" % ROOM)
        check(status == 400, "since=-1: HTTP %d" % status)
        status, _, out = await http(port, "GET", "/chat/%s/who" % ROOM)
        check(status == 200 and "form user" in json.loads(out)["who"], "who: %r" % out)
        # A client ahead of the room is answered at once with the room's last id.
        t = time.monotonic()
        answer = await poll(port, 10 ** 9, 30)
        check(time.monotonic() - t < 5 and answer["messages"] == [], "since ahead of the room")
        status, _, page = await http(port, "GET", "/chat/%s/" % ROOM)
        check(status == 200 and b"hi from a form" in page and b"/static/chat.js" in page,
              "the room page shows the messages and loads chat.js")
        print("api: form, JSON, 303, 400, 403, 404, who, page: ok")

    asyncio.run(run())


def vanish(site, total, batch, last):
    """`total` clients, `batch` at a time: each parks a long-poll, then drops its connection."""
    port = site.port

    async def one_batch(n):
        conns = []
        for _ in range(n):
            _, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(("GET /chat/%s/messages?since=%d&wait=30 HTTP/1.1\r\nHost: x\r\n\r\n"
                          % (ROOM, last)).encode())
            conns.append(writer)
        await asyncio.gather(*(w.drain() for w in conns))
        return conns

    done = 0
    total0 = sum(s["parked_total"] for s in process_stats(site))
    while done < total:
        n = min(batch, total - done)
        loop = asyncio.new_event_loop()
        try:
            conns = loop.run_until_complete(one_batch(n))
            target = total0 + done + n  # counted when parked, so leftovers cannot fool it
            wait_until(lambda: sum(s["parked_total"] for s in process_stats(site)) >= target,
                       20, "a batch of %d polls to park" % n)
            for w in conns:
                w.transport.abort()  # the client vanishes (RST), as a closed browser tab
            loop.run_until_complete(asyncio.sleep(0))
        finally:
            loop.close()
        done += n
    wait_until(lambda: parked(site) == 0, 45, "every vanished poll to leave the lot")


def phase_disconnect(site, total=10000, batch=500):
    last = asyncio.run(poll(site.port, 0, 0))["last"]
    pids = site.pids()
    # Warm-up: let the allocators and the servers' buffers reach their working size, so the
    # RSS comparison below measures growth per client, not the first use of memory.
    vanish(site, 2000, batch, last)
    fds0 = [site.fd_count(p) for p in pids]
    rss0 = [site.rss_kb(p) for p in pids]
    heap0 = heap_in_use(site)
    before = process_stats(site)

    t0 = time.monotonic()
    vanish(site, total, batch, last)
    print("disconnect: %d clients parked and vanished; lot empty after %.1f s" %
          (total, time.monotonic() - t0))
    after = process_stats(site)
    freed = sum(a["gone"] - b["gone"] for a, b in zip(after, before))
    expired = sum(a["expired"] - b["expired"] for a, b in zip(after, before))
    print("disconnect: freed as gone %d, expired %d" % (freed, expired))
    check(freed + expired == total, "%d of %d parked polls were freed" % (freed + expired, total))
    # Connections the web server closed are closed by the front end too: fds return.
    wait_until(lambda: all(site.fd_count(p) <= f + 8 for p, f in zip(pids, fds0)), 20,
               "fd counts to return near %r (now %r)" % (fds0, [site.fd_count(p) for p in pids]))
    fds1 = [site.fd_count(p) for p in pids]
    rss1 = [site.rss_kb(p) for p in pids]
    heap1 = heap_in_use(site)
    print("disconnect: fds %r -> %r, RSS KiB %r -> %r, heap in use KiB %r -> %r" % (
        fds0, fds1, rss0, rss1, [h // 1024 for h in heap0], [h // 1024 for h in heap1]))
    # RSS includes what malloc keeps cached in its per-thread arenas after a burst of parked
    # requests, so it is reported only; the heap in use is exact. A leak of 100 bytes per
    # client would be ~1 MiB here.
    for h0, h1 in zip(heap0, heap1):
        check(h1 - h0 < 512 * 1024, "heap in use grew by %d KiB over %d disconnects" % (
            (h1 - h0) // 1024, total))


def heap_in_use(site):
    return [doc["in_use"] for doc in site.each_process_json("/_test/heap")]


def main():
    if len(sys.argv) < 3:
        print(__doc__)
        return 2
    demo, source = sys.argv[1], sys.argv[2]
    phases = sys.argv[3:] or ["api", "park200", "exactly_once", "disconnect"]
    # Every client here is 127.0.0.1 (nginx's REMOTE_ADDR): lift the per-address limits this
    # test is not about (tests/integration/abuse/ checks them).
    sets = ["data.fsync=never", "chat.rooms=lobby,other", "test.routes=true",
            "chat.say_per_minute=0", "chat.max_waiters=20000",
            "chat.max_waiters_per_client=20000"]

    def run(site):
        fetch_token(site)
        for phase in phases:
            globals()["phase_" + phase](site)

    return run_site(demo, source, run, processes=2, threads=4, sets=sets)


if __name__ == "__main__":
    sys.exit(main())
