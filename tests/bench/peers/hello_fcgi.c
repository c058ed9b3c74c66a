/* The raw FastCGI floor for scripts/bench: a minimal threaded libfcgi hello world, the way a
 * C programmer would write one. Every thread runs the classic FCGX_Accept_r loop on the
 * shared listening socket (fd 0, as spawn-fcgi hands it over). With nginx's
 * fastcgi_keep_conn a thread stays on its kept connection, so the driver starts as many
 * threads as nginx may keep connections.
 *
 *   cc -O2 -pthread hello_fcgi.c -lfcgi -o hello_fcgi && spawn-fcgi -s SOCK -- ./hello_fcgi 32
 */
#include <fcgiapp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

static const char kAnswer[] =
    "Status: 200 OK\r\n"
    "Content-Type: text/plain; charset=utf-8\r\n"
    "\r\n"
    "hello\n";

static void* serve(void* unused) {
  (void)unused;
  FCGX_Request request;
  if (FCGX_InitRequest(&request, 0, 0) != 0) return NULL;
  while (FCGX_Accept_r(&request) >= 0) {
    FCGX_PutStr(kAnswer, (int)(sizeof kAnswer - 1), request.out);
    FCGX_Finish_r(&request);
  }
  return NULL;
}

int main(int argc, char** argv) {
  int threads = argc > 1 ? atoi(argv[1]) : 32;
  if (threads < 1 || threads > 1024) {
    fprintf(stderr, "usage: hello_fcgi [THREADS 1..1024]\n");
    return 2;
  }
  if (FCGX_Init() != 0) return 1;
  pthread_t* ids = calloc((size_t)threads, sizeof *ids);
  if (!ids) return 1;
  for (int i = 0; i < threads; ++i) pthread_create(&ids[i], NULL, serve, NULL);
  for (int i = 0; i < threads; ++i) pthread_join(ids[i], NULL);
  free(ids);
  return 0;
}
