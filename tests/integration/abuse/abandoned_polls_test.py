#!/usr/bin/env python3
"""Abuse: long-polls opened by the thousand and abandoned (hardening item 9).

Each parked long-poll holds a connection (a descriptor in kagi and one in nginx), so without
a cap one client could park polls until the process runs out of descriptors. One kagi-demo
process behind a real nginx (the chat harness), with chat.max_waiters = MAX_WAITERS and
chat.max_waiters_per_client = PER_CLIENT:

  per client  one address opens PER_CLIENT + EXTRA polls and keeps them open: PER_CLIENT
              park, the EXTRA get 429 + Retry-After + a JSON error at once;
  lot full    ADDRESSES addresses open PER_CLIENT polls each, more than MAX_WAITERS in all:
              MAX_WAITERS park, the rest get 429 ("too many clients waiting");
  abandoned   ABANDONED polls from 20 addresses in 10 waves, each connection dropped (RST)
              right after its request is sent, while a normal reader (LatencyProbe) loads
              the room page:
              the parked count never exceeds the cap, and returns to 0 after the clients
              left; then a normal poll parks again (its place was given back).

The abandoned polls leave the lot because nginx closes the FastCGI connection of a client
that went away and kagi's FastCGI front end notices it (ParkingLot::sweep_gone, every
second). Front ends that cannot notice it free the place at the poll's deadline, so the
wait for 0 is bounded by the poll's wait= (WAIT_S) plus a margin.

All traffic is on the loopback interface: the servers listen on 127.0.0.1; clients bind
other 127.0.0.x source addresses only so that kagi sees distinct client addresses.
"""

import argparse
import asyncio
import json
import os
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "chat"))  # its harness.py comes first
from harness import fcgi_get, parse_response, run_site, wait_until  # noqa: E402
from probe import LatencyProbe, P99_BOUND_MS, P99_GOAL_MS, RssSampler  # noqa: E402

MAX_WAITERS, PER_CLIENT, EXTRA = 300, 100, 20
ADDRESSES = 4  # 4 x 100 = 400 polls for 300 places
ABANDONED = 2000
WAIT_S = 30  # the polls' wait=: the longest a place can stay taken
ROOM = "lobby"
RSS_BOUND_KIB = 64 * 1024


def check(ok, message):
    print(("  ok   " if ok else "  FAIL ") + message, flush=True)
    if not ok:
        raise AssertionError(message)


def stats(site):
    status, body = fcgi_get(site.sockets[0], "/chat/stats.json")
    if status != 200:
        raise AssertionError("stats.json: HTTP %d" % status)
    return json.loads(body)


def poll_request(since):
    return ("GET /chat/%s/messages?since=%d&wait=%d HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            "Connection: close\r\n\r\n" % (ROOM, since, WAIT_S)).encode()


async def open_polls(port, source, n, since):
    """`n` polls from `source`, each on its own connection: [(reader, writer)]."""
    conns = []
    for _ in range(n):
        reader, writer = await asyncio.open_connection("127.0.0.1", port,
                                                       local_addr=(source, 0))
        writer.write(poll_request(since))
        conns.append((reader, writer))
    await asyncio.gather(*(w.drain() for _, w in conns))
    return conns


async def answers_while_parked(site, groups, want_parked, since):
    """Opens the polls of `groups` ([(source, n)]) and keeps them open; once `want_parked`
    are parked, collects the answers that came at once. Returns (answers, still open)."""
    conns = []
    for source, n in groups:
        conns += await open_polls(site.port, source, n, since)
    tasks = [asyncio.ensure_future(r.read()) for r, _ in conns]
    deadline = time.monotonic() + 30
    while stats(site)["parked"] < want_parked:
        if time.monotonic() > deadline:
            check(False, "%d polls parked within 30 s (now %d)" % (
                want_parked, stats(site)["parked"]))
        await asyncio.sleep(0.05)
    expected_answers = len(conns) - want_parked
    while sum(t.done() for t in tasks) < expected_answers:
        if time.monotonic() > deadline:
            check(False, "the %d polls beyond the caps were answered at once (%d were; "
                  "parked now %d)" % (expected_answers, sum(t.done() for t in tasks),
                                      stats(site)["parked"]))
        await asyncio.sleep(0.05)
    answers = [parse_response(t.result()) for t in tasks if t.done()]
    still = [(conns[i][1], t) for i, t in enumerate(tasks) if not t.done()]
    return answers, still


async def abandon(still):
    for writer, task in still:
        writer.transport.abort()  # RST: the client vanished
        task.cancel()
    await asyncio.sleep(0)


def check_refusals(answers, n, what):
    statuses = sorted({a[0] for a in answers})
    check(len(answers) == n and statuses == [429], "%s: %d polls answered at once, all 429 "
          "(got %d, statuses %r)" % (what, n, len(answers), statuses))
    check(all(int(a[1].get("retry-after", "0")) >= 1 for a in answers),
          "%s: every 429 carries Retry-After" % what)
    bodies = {json.loads(a[2])["error"] for a in answers}
    print("  %s: %s" % (what, " | ".join(sorted(bodies))))
    return bodies


def wait_parked_zero(site, what):
    t0 = time.monotonic()
    wait_until(lambda: stats(site)["parked"] == 0, WAIT_S + 15,
               "the parked count to return to 0 after " + what)
    took = time.monotonic() - t0
    print("  parked back to 0 %.1f s after %s" % (took, what))
    return took


def run(site):
    since = json.loads(fcgi_get(site.sockets[0], "/chat/%s/messages" % ROOM,
                                "since=0&wait=0")[1])["last"]

    async def caps():
        # 1. One address beyond its own cap.
        answers, still = await answers_while_parked(
            site, [("127.0.0.2", PER_CLIENT + EXTRA)], PER_CLIENT, since)
        bodies = check_refusals(answers, EXTRA, "per client")
        check(all(b.startswith("Your address has too many polls") for b in bodies),
              "per client: the error says the address is at its cap")
        s = stats(site)
        check(s["parked"] == PER_CLIENT and s["clients"] == 1,
              "per client: %d parked from 1 client (stats %r)" % (PER_CLIENT, s))
        await abandon(still)
        wait_parked_zero(site, "the per-client test")

        # 2. More addresses than the process has places for.
        groups = [("127.0.0.%d" % (3 + i), PER_CLIENT) for i in range(ADDRESSES)]
        answers, still = await answers_while_parked(site, groups, MAX_WAITERS, since)
        bodies = check_refusals(answers, ADDRESSES * PER_CLIENT - MAX_WAITERS, "lot full")
        check(all(b.startswith("The chat has too many clients waiting") for b in bodies),
              "lot full: the error says the chat is full")
        await abandon(still)
        wait_parked_zero(site, "the lot-full test")

    asyncio.run(caps())

    # 3. 2,000 polls abandoned right after they are sent, while a reader uses the site.
    before = stats(site)
    peak = {"parked": 0}
    sampling = threading.Event()

    def sample():
        while not sampling.is_set():
            peak["parked"] = max(peak["parked"], stats(site)["parked"])
            sampling.wait(0.05)

    async def attack():
        sources = ["127.0.0.%d" % (10 + i) for i in range(20)]
        done = 0
        while done < ABANDONED:
            batch = []
            for source in sources:
                batch += await open_polls(site.port, source, 10, since)
            for _, writer in batch:
                writer.transport.abort()
            done += len(batch)
            await asyncio.sleep(0.3)  # 10 waves over ~3 s, so the reader sees the attack
        return done

    rss = RssSampler(site.pids, max_seconds=120).start()
    probe = LatencyProbe(site.port, "/chat/%s/" % ROOM, max_seconds=120).start()
    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    t0 = time.monotonic()
    sent = asyncio.run(attack())
    attack_s = time.monotonic() - t0
    probe.stop()  # the reader measured the attack itself
    took = wait_parked_zero(site, "%d abandoned polls" % sent)
    sampling.set()
    sampler.join(5)
    rss.stop()
    after = stats(site)
    reached = after["parked_total"] - before["parked_total"]
    print("abandoned: %d polls sent and dropped in %.1f s; %d reached the lot (%d gone, %d "
          "expired, %d refused), peak parked %d" % (
              sent, attack_s, reached, after["gone"] - before["gone"],
              after["expired"] - before["expired"], after["refused"] - before["refused"],
              peak["parked"]))
    print("reader during the attack: %s (goal p99 %.0f ms)" % (probe.summary(), P99_GOAL_MS))
    print("kagi process: %s" % rss.summary())
    check(sent == ABANDONED, "%d polls opened and abandoned" % sent)
    check(peak["parked"] <= MAX_WAITERS, "parked never above chat.max_waiters (peak %d)" %
          peak["parked"])
    check(after["gone"] - before["gone"] + after["expired"] - before["expired"] == reached,
          "every poll that parked left the lot (gone or expired)")
    check(took < WAIT_S + 15, "the lot emptied within the polls' wait (%d s) + 15 s" % WAIT_S)

    # The places were given back: a normal client parks and is answered at its deadline.
    status, headers, body = asyncio.run(poll_once(site.port, since))
    check(status == 200 and json.loads(body)["messages"] == [],
          "a normal poll after the attack parks and ends empty at its deadline (HTTP %d)" %
          status)

    p99 = probe.p99()
    check(len(probe.latencies_ms) >= 20, "the reader made %d requests" % len(probe.latencies_ms))
    check(not probe.failures, "the reader's requests all succeeded (%r)" % probe.failures[:5])
    check(p99 <= P99_BOUND_MS, "reader p99 %.1f ms <= %.0f ms (goal %.0f ms)" % (
        p99, P99_BOUND_MS, P99_GOAL_MS))
    check(rss.peak_kib - rss.first_kib < RSS_BOUND_KIB, "RSS grew by %d KiB (< %d KiB)" % (
        rss.peak_kib - rss.first_kib, RSS_BOUND_KIB))


async def poll_once(port, since):
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(poll_request(since).replace(b"wait=%d" % WAIT_S, b"wait=1"))
    await writer.drain()
    data = await asyncio.wait_for(reader.read(), 15)
    writer.close()
    return parse_response(data)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--demo", required=True)
    parser.add_argument("--source", required=True)
    args = parser.parse_args()
    sets = ["chat.max_waiters=%d" % MAX_WAITERS, "chat.max_waiters_per_client=%d" % PER_CLIENT,
            "data.fsync=never"]
    return run_site(args.demo, args.source, run, processes=1, threads=4, sets=sets)


if __name__ == "__main__":
    sys.exit(main())
