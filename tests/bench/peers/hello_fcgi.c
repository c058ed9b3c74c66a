/* The raw FastCGI floor for scripts/bench: a minimal threaded libfcgi hello world, the way a
 * C programmer would write one. Every thread runs the classic FCGX_Accept_r loop on the
 * shared listening socket (fd 0, as spawn-fcgi hands it over). With nginx's
 * fastcgi_keep_conn a thread stays on its kept connection, so the driver starts as many
 * threads as nginx may keep connections.
 *
 * With a FILE it answers that file's bytes as HTML instead: the floor for a page of that
 * size (scripts/bench gives it the BBS page and the chat poll kagi answered).
 *
 * With --append LOG it is the floor of a locked write (a BBS post, a chat say): each request's
 * body is appended to LOG as one line under an exclusive flock, and answered 303. Each thread
 * opens LOG once (flock excludes open files, not threads), and nothing is read, parsed or
 * synced: the least a correct append can do.
 *
 *   cc -O2 -pthread hello_fcgi.c -lfcgi -o hello_fcgi
 *   spawn-fcgi -s SOCK -- ./hello_fcgi 32 [FILE | --append LOG]
 */
#include <fcgiapp.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

static const char kHello[] =
    "Status: 200 OK\r\n"
    "Content-Type: text/plain; charset=utf-8\r\n"
    "\r\n"
    "hello\n";
static const char kHtmlHeader[] =
    "Status: 200 OK\r\n"
    "Content-Type: text/html; charset=utf-8\r\n"
    "\r\n";

static const char kSeeOther[] =
    "Status: 303 See Other\r\n"
    "Location: /\r\n"
    "Content-Length: 0\r\n"
    "\r\n";

static char* answer; /* the whole answer, header included */
static long answer_size;
static const char* append_log; /* --append: the log every body goes to */

static void* serve(void* unused) {
  (void)unused;
  FCGX_Request request;
  if (FCGX_InitRequest(&request, 0, 0) != 0) return NULL;
  while (FCGX_Accept_r(&request) >= 0) {
    FCGX_PutStr(answer, (int)answer_size, request.out);
    FCGX_Finish_r(&request);
  }
  return NULL;
}

/* One request of --append: the body (up to 64 KiB), a newline, one write under the lock. */
static int append_body(FCGX_Request* request, int fd, char* line, int size) {
  int n = 0, got;
  while (n < size - 1 && (got = FCGX_GetStr(line + n, size - 1 - n, request->in)) > 0) n += got;
  line[n++] = '\n';
  if (flock(fd, LOCK_EX) != 0) return -1;
  ssize_t written = write(fd, line, (size_t)n);
  flock(fd, LOCK_UN);
  return written == n ? 0 : -1;
}

static void* serve_appends(void* unused) {
  (void)unused;
  static char failed[] = "Status: 500 Internal Server Error\r\n\r\n";
  char* line = malloc(65536);
  int fd = open(append_log, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  FCGX_Request request;
  if (!line || fd < 0 || FCGX_InitRequest(&request, 0, 0) != 0) return NULL;
  while (FCGX_Accept_r(&request) >= 0) {
    if (append_body(&request, fd, line, 65536) == 0) {
      FCGX_PutStr(kSeeOther, (int)(sizeof kSeeOther - 1), request.out);
    } else {
      FCGX_PutStr(failed, (int)(sizeof failed - 1), request.out);
    }
    FCGX_Finish_r(&request);
  }
  return NULL;
}

/* The answer: the hello, or the HTML header and the bytes of `path`. */
static int load_answer(const char* path) {
  if (!path) {
    answer = (char*)kHello;
    answer_size = (long)(sizeof kHello - 1);
    return 0;
  }
  FILE* f = fopen(path, "rb");
  if (!f) return -1;
  if (fseek(f, 0, SEEK_END) != 0) return -1;
  long body = ftell(f);
  rewind(f);
  long header = (long)(sizeof kHtmlHeader - 1);
  answer = malloc((size_t)(header + body));
  if (body < 0 || !answer) return -1;
  memcpy(answer, kHtmlHeader, (size_t)header);
  if (fread(answer + header, 1, (size_t)body, f) != (size_t)body) return -1;
  fclose(f);
  answer_size = header + body;
  return 0;
}

int main(int argc, char** argv) {
  int threads = argc > 1 ? atoi(argv[1]) : 32;
  if (threads < 1 || threads > 1024 || (argc > 2 && !strcmp(argv[2], "--append") && argc < 4)) {
    fprintf(stderr, "usage: hello_fcgi [THREADS 1..1024] [FILE | --append LOG]\n");
    return 2;
  }
  if (argc > 3 && !strcmp(argv[2], "--append")) {
    append_log = argv[3];
  } else if (load_answer(argc > 2 ? argv[2] : NULL) != 0) {
    perror(argv[2]);
    return 2;
  }
  if (FCGX_Init() != 0) return 1;
  pthread_t* ids = calloc((size_t)threads, sizeof *ids);
  if (!ids) return 1;
  for (int i = 0; i < threads; ++i) {
    pthread_create(&ids[i], NULL, append_log ? serve_appends : serve, NULL);
  }
  for (int i = 0; i < threads; ++i) pthread_join(ids[i], NULL);
  free(ids);
  return 0;
}
