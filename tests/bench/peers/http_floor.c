/* The HTTP floor for scripts/bench: the least an HTTP/1.1 server can do to answer a hello on
 * kept-alive connections, so the embedded front end's goals can be set beside what any server
 * makes on this machine, with wrk on the same cores.
 *
 * One thread per core, each with its own listening socket on the port (SO_REUSEPORT: the
 * kernel spreads the connections) and its own epoll set. A read counts the request heads that
 * ended in it ("\r\n\r\n") and answers each with the same fixed bytes, all in one write. No
 * parsing, no routing, no allocation after start: nothing a real server could leave out is
 * left in. It does not handle bodies, heads split over reads at the separator, or a client
 * that stops reading (a full socket drops the connection): wrk's GETs need none of that.
 *
 *   cc -O2 -pthread http_floor.c -o http_floor
 *   ./http_floor PORT [THREADS]
 */
#define _GNU_SOURCE /* accept4 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

static const char kHello[] =
    "HTTP/1.1 200 OK\r\n"
    "Content-Type: text/plain\r\n"
    "Content-Length: 6\r\n"
    "\r\n"
    "hello\n";

enum { kMaxAnswers = 64, kReadBytes = 16384, kEvents = 64 };

static int port;
static char answers[kMaxAnswers * (sizeof kHello - 1)]; /* kHello, kMaxAnswers times */

static int listen_on_port(void) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
  int on = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
  setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &on, sizeof on);
  struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (bind(fd, (struct sockaddr*)&addr, sizeof addr) != 0 || listen(fd, 1024) != 0) {
    perror("http_floor: bind/listen");
    exit(1);
  }
  return fd;
}

/* How many request heads end in buf[0, n) (a separator split across two reads is missed). */
static int heads_ended(const char* buf, ssize_t n) {
  int heads = 0;
  for (ssize_t i = 3; i < n; ++i) {
    if (buf[i] == '\n' && buf[i - 1] == '\r' && buf[i - 2] == '\n' && buf[i - 3] == '\r') ++heads;
  }
  return heads;
}

static void serve(int epoll, int fd) {
  char buf[kReadBytes];
  for (;;) {
    ssize_t n = read(fd, buf, sizeof buf);
    if (n > 0) {
      int heads = heads_ended(buf, n);
      while (heads > 0) {
        int now = heads < kMaxAnswers ? heads : kMaxAnswers;
        size_t bytes = (size_t)now * (sizeof kHello - 1);
        /* MSG_NOSIGNAL: a connection wrk closed between its runs ends here, not the program. */
        if (send(fd, answers, bytes, MSG_NOSIGNAL) != (ssize_t)bytes) goto drop;
        heads -= now;
      }
      if (n < (ssize_t)sizeof buf) return; /* drained: wait for the next request */
      continue;
    }
    if (n < 0 && errno == EAGAIN) return;
    if (n < 0 && errno == EINTR) continue;
    goto drop;
  }
drop:
  epoll_ctl(epoll, EPOLL_CTL_DEL, fd, NULL);
  close(fd);
}

static void* run(void* unused) {
  (void)unused;
  int listener = listen_on_port();
  int epoll = epoll_create1(0);
  struct epoll_event ev = {.events = EPOLLIN, .data.fd = listener};
  epoll_ctl(epoll, EPOLL_CTL_ADD, listener, &ev);
  struct epoll_event ready[kEvents];
  for (;;) {
    int count = epoll_wait(epoll, ready, kEvents, -1);
    for (int i = 0; i < count; ++i) {
      int fd = ready[i].data.fd;
      if (fd != listener) {
        serve(epoll, fd);
        continue;
      }
      int client;
      while ((client = accept4(listener, NULL, NULL, SOCK_NONBLOCK)) >= 0) {
        int on = 1;
        setsockopt(client, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
        struct epoll_event cev = {.events = EPOLLIN, .data.fd = client};
        epoll_ctl(epoll, EPOLL_CTL_ADD, client, &cev);
      }
    }
  }
  return NULL;
}

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: http_floor PORT [THREADS]\n");
    return 2;
  }
  port = atoi(argv[1]);
  long threads = argc > 2 ? atol(argv[2]) : sysconf(_SC_NPROCESSORS_ONLN);
  for (int i = 0; i < kMaxAnswers; ++i) {
    memcpy(answers + (size_t)i * (sizeof kHello - 1), kHello, sizeof kHello - 1);
  }
  pthread_t thread;
  for (long i = 1; i < threads; ++i) pthread_create(&thread, NULL, run, NULL);
  run(NULL);
  return 0;
}
