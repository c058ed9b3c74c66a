// bench_lockd_pairs: lock + unlock pairs per second over kept connections, one client program
// and one pattern for three lock servers (tests/bench/lockd/lockd_bench.py runs it):
//
//   kagi-lockd  "LOCK bench/<c> 0\n" -> "ok <token>\n", then "UNLOCK bench/<c>\n" -> "ok\n"
//   Redis       SET bench/<c> 1 NX   -> +OK,            then DEL bench/<c>        -> :1
//   PostgreSQL  SELECT pg_try_advisory_lock(<c>) -> t,  then SELECT pg_advisory_unlock(<c>) -> t
//
//   bench_lockd_pairs --proto lockd|redis|pg --target HOST:PORT|DSN [--connections 32]
//                     [--seconds 5] [--warmup 1]
//
// Each connection has a key of its own (the pair is never refused) and sends its next command
// when the answer to the last one is in. One thread, one epoll set: the client costs the same
// for every server (PostgreSQL's answers go through libpq, the others' are parsed here). Prints
// one JSON line: pairs, pairs/s, p50/p99 of a pair in microseconds, errors.
#include <arpa/inet.h>
#include <fcntl.h>
#include <libpq-fe.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

struct Conn {
  int fd = -1;
  PGconn* pg = nullptr;
  int phase = 0;  // 0: the lock is asked, 1: the unlock is asked
  Clock::time_point pair_started;
  std::string in;
  std::string lock_cmd, unlock_cmd;
};

[[noreturn]] void die(const std::string& why) {
  std::fprintf(stderr, "bench_lockd_pairs: %s\n", why.c_str());
  std::exit(2);
}

int connect_tcp(const std::string& target) {
  const size_t colon = target.rfind(':');
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(std::stoi(target.substr(colon + 1))));
  if (inet_pton(AF_INET, target.substr(0, colon).c_str(), &a.sin_addr) != 1) die("bad target");
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) die("connect " + target);
  const int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  ::fcntl(fd, F_SETFL, O_NONBLOCK);
  return fd;
}

std::string resp(std::initializer_list<std::string> args) {
  std::string out = "*" + std::to_string(args.size()) + "\r\n";
  for (const std::string& a : args) out += "$" + std::to_string(a.size()) + "\r\n" + a + "\r\n";
  return out;
}

// The answer in c.in is complete: 1 (good), 0 (complete but wrong), -1 (not yet).
int answer(const std::string& proto, Conn& c) {
  const size_t end = c.in.find('\n');
  if (end == std::string::npos) return -1;
  const std::string line = c.in.substr(0, end + 1);
  c.in.erase(0, end + 1);
  if (proto == "lockd") return c.phase == 0 ? line.rfind("ok ", 0) == 0 : line == "ok\n";
  return c.phase == 0 ? line == "+OK\r\n" : line == ":1\r\n";
}

}  // namespace

int main(int argc, char** argv) {
  std::string proto, target;
  int connections = 32;
  double seconds = 5, warmup = 1;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i], v = argv[i + 1];
    if (k == "--proto")
      proto = v;
    else if (k == "--target")
      target = v;
    else if (k == "--connections")
      connections = std::stoi(v);
    else if (k == "--seconds")
      seconds = std::stod(v);
    else if (k == "--warmup")
      warmup = std::stod(v);
    else
      die("unknown flag " + k);
  }
  if (proto != "lockd" && proto != "redis" && proto != "pg") die("--proto lockd|redis|pg");
  const int ep = ::epoll_create1(0);
  std::vector<Conn> conns(static_cast<size_t>(connections));
  for (int i = 0; i < connections; ++i) {
    Conn& c = conns[static_cast<size_t>(i)];
    const std::string key = "bench/" + std::to_string(i);
    if (proto == "pg") {
      c.pg = PQconnectdb(target.c_str());
      if (PQstatus(c.pg) != CONNECTION_OK) die(PQerrorMessage(c.pg));
      PQsetnonblocking(c.pg, 1);
      c.fd = PQsocket(c.pg);
      c.lock_cmd = "SELECT pg_try_advisory_lock(" + std::to_string(1000 + i) + ")";
      c.unlock_cmd = "SELECT pg_advisory_unlock(" + std::to_string(1000 + i) + ")";
    } else {
      c.fd = connect_tcp(target);
      c.lock_cmd = proto == "lockd" ? "LOCK " + key + " 0\n" : resp({"SET", key, "1", "NX"});
      c.unlock_cmd = proto == "lockd" ? "UNLOCK " + key + "\n" : resp({"DEL", key});
    }
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u32 = static_cast<uint32_t>(i);
    ::epoll_ctl(ep, EPOLL_CTL_ADD, c.fd, &ev);
  }
  auto send = [&](Conn& c, const std::string& cmd) {
    if (c.pg) {
      if (!PQsendQuery(c.pg, cmd.c_str())) die(PQerrorMessage(c.pg));
      while (PQflush(c.pg) == 1) {
      }
      return;
    }
    if (::send(c.fd, cmd.data(), cmd.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(cmd.size())) {
      die("short send");
    }
  };
  const auto t0 = Clock::now();
  const auto measure_from =
      t0 + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(warmup));
  const auto until = measure_from + std::chrono::duration_cast<Clock::duration>(
                                        std::chrono::duration<double>(seconds));
  for (Conn& c : conns) {
    c.pair_started = Clock::now();
    send(c, c.lock_cmd);
  }
  std::vector<uint32_t> latencies_us;
  latencies_us.reserve(4'000'000);
  uint64_t pairs = 0, errors = 0;
  std::vector<epoll_event> events(static_cast<size_t>(connections));
  char buf[4096];
  bool running = true;
  // After the measured time every connection finishes its pair (an unlock is never left out:
  // Redis would keep the key for the next run), then the loop ends.
  size_t busy = conns.size();
  while (busy > 0) {
    const int n = ::epoll_wait(ep, events.data(), connections, 100);
    const auto now = Clock::now();
    if (now >= until) running = false;
    for (int e = 0; e < n; ++e) {
      Conn& c = conns[events[static_cast<size_t>(e)].data.u32];
      int got = -1;
      if (c.pg) {
        if (!PQconsumeInput(c.pg)) die(PQerrorMessage(c.pg));
        if (PQisBusy(c.pg)) continue;
        got = 1;
        while (PGresult* r = PQgetResult(c.pg)) {
          if (PQresultStatus(r) != PGRES_TUPLES_OK || std::strcmp(PQgetvalue(r, 0, 0), "t") != 0) {
            got = 0;
          }
          PQclear(r);
        }
      } else {
        const ssize_t r = ::recv(c.fd, buf, sizeof buf, 0);
        if (r <= 0) die("connection lost");
        c.in.append(buf, static_cast<size_t>(r));
        got = answer(proto, c);
        if (got < 0) continue;
      }
      if (got == 0) ++errors;
      if (c.phase == 0) {
        c.phase = 1;
        send(c, c.unlock_cmd);
        continue;
      }
      const auto done = Clock::now();
      if (c.pair_started >= measure_from && done <= until) {
        ++pairs;
        latencies_us.push_back(static_cast<uint32_t>(
            std::chrono::duration_cast<std::chrono::microseconds>(done - c.pair_started).count()));
      }
      c.phase = 0;
      c.pair_started = done;
      if (running) {
        send(c, c.lock_cmd);
      } else {
        --busy;
      }
    }
  }
  std::sort(latencies_us.begin(), latencies_us.end());
  auto pct = [&](double p) -> double {
    if (latencies_us.empty()) return 0;
    return latencies_us[std::min(
        latencies_us.size() - 1,
        static_cast<size_t>(p * static_cast<double>(latencies_us.size())))];
  };
  std::printf(
      "{\"proto\":\"%s\",\"connections\":%d,\"seconds\":%.3f,\"pairs\":%llu,\"pairs_per_s\":%.1f,"
      "\"p50_us\":%.0f,\"p99_us\":%.0f,\"errors\":%llu}\n",
      proto.c_str(), connections, seconds, static_cast<unsigned long long>(pairs),
      static_cast<double>(pairs) / seconds, pct(0.5), pct(0.99),
      static_cast<unsigned long long>(errors));
  for (Conn& c : conns) {
    if (c.pg)
      PQfinish(c.pg);
    else
      ::close(c.fd);
  }
  return errors == 0 && pairs > 0 ? 0 : 1;
}
