/* The queue's C API against a real redis-server (started here on a free loopback port):
 * submit, get, cancel, a worker with C handlers, and the errors at the edges. */
#define _POSIX_C_SOURCE 200809L
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "spool/queue.h"

static pid_t redis_pid = -1;

static int free_port(void) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a;
  socklen_t len = sizeof a;
  memset(&a, 0, sizeof a);
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (fd < 0 || bind(fd, (struct sockaddr*)&a, sizeof a) != 0 ||
      getsockname(fd, (struct sockaddr*)&a, &len) != 0) {
    perror("free_port");
    exit(2);
  }
  close(fd);
  return ntohs(a.sin_port);
}

static int answers(int port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a;
  memset(&a, 0, sizeof a);
  a.sin_family = AF_INET;
  a.sin_port = htons((unsigned short)port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  int ok = connect(fd, (struct sockaddr*)&a, sizeof a) == 0;
  close(fd);
  return ok;
}

static void start_redis(int port) {
  char port_text[16];
  snprintf(port_text, sizeof port_text, "%d", port);
  redis_pid = fork();
  if (redis_pid == 0) {
    execlp("redis-server", "redis-server", "--port", port_text, "--bind", "127.0.0.1", "--save", "",
           "--appendonly", "no", "--logfile", "/dev/null", (char*)NULL);
    _exit(127);
  }
  for (int i = 0; i < 2000 && !answers(port); ++i) {
    const struct timespec pause = {0, 10 * 1000 * 1000}; /* polling another process */
    nanosleep(&pause, NULL);
  }
  if (!answers(port)) {
    fprintf(stderr, "redis-server did not start on port %d\n", port);
    exit(2);
  }
}

static void stop_redis(void) {
  if (redis_pid > 0) {
    kill(redis_pid, SIGTERM);
    waitpid(redis_pid, NULL, 0);
  }
}

/* Handlers. */
static int reverse(const spool_queue_job* job, const void* payload, size_t size,
                   spool_queue_reply* reply, void* arg) {
  (void)arg;
  char out[256];
  if (size >= sizeof out) return spool_queue_reply_set(reply, "too long", 8), 1;
  for (size_t i = 0; i < size; ++i) out[i] = ((const char*)payload)[size - 1 - i];
  CHECK(job->attempt >= 1);
  CHECK(strcmp(job->queue, "cq") == 0);
  CHECK(strcmp(job->task, "reverse") == 0);
  CHECK(spool_queue_job_cancelled(job) == 0);
  return spool_queue_reply_set(reply, out, size);
}

static int refuse(const spool_queue_job* job, const void* payload, size_t size,
                  spool_queue_reply* reply, void* arg) {
  (void)job;
  (void)payload;
  (void)size;
  ++*(int*)arg;
  spool_queue_reply_set(reply, "refused in C", 12);
  return 7;
}

int main(void) {
  check_watchdog(120);
  const int port = free_port();
  start_redis(port);
  char url[64];
  snprintf(url, sizeof url, "redis://127.0.0.1:%d", port);

  /* Bad arguments. */
  spool_queue_producer* p = NULL;
  CHECK_EQ(spool_queue_producer_create(NULL, NULL, &p), SPOOL_QUEUE_EINVAL);
  CHECK_EQ(spool_queue_producer_create("redis://", NULL, &p), SPOOL_QUEUE_EINVAL);
  CHECK(strstr(spool_queue_last_error(), "store spec") != NULL);
  CHECK_EQ(spool_queue_producer_create("sqlite:x.db", NULL, &p), SPOOL_QUEUE_EINVAL);
  CHECK_EQ(spool_queue_producer_create(url, NULL, &p), SPOOL_QUEUE_OK);
  CHECK(strcmp(spool_queue_last_error(), "") == 0);
  char id[SPOOL_QUEUE_ID_MAX];
  CHECK_EQ(spool_queue_submit(p, "my queue", "t", "", 0, NULL, id, sizeof id), SPOOL_QUEUE_EINVAL);
  CHECK(strstr(spool_queue_last_error(), "space") != NULL);
  CHECK_EQ(spool_queue_submit(p, "cq", NULL, "", 0, NULL, id, sizeof id), SPOOL_QUEUE_EINVAL);
  CHECK_EQ(spool_queue_submit(p, "cq", "t", NULL, 5, NULL, id, sizeof id), SPOOL_QUEUE_EINVAL);
  spool_queue_submit_options o;
  spool_queue_submit_options_init(&o);
  CHECK_EQ(o.attempts, 1);
  CHECK_EQ(o.priority, 1);
  o.attempts = 0;
  CHECK_EQ(spool_queue_submit(p, "cq", "t", "", 0, &o, id, sizeof id), SPOOL_QUEUE_EINVAL);
  o.attempts = 1;
  o.priority = 3;
  CHECK_EQ(spool_queue_submit(p, "cq", "t", "", 0, &o, id, sizeof id), SPOOL_QUEUE_EINVAL);
  spool_queue_result r = {NULL, 0};
  CHECK_EQ(spool_queue_get(p, "cq/77", 0, &r), SPOOL_QUEUE_ENOTFOUND);
  CHECK_EQ(spool_queue_get(p, "nonsense", 0, &r), SPOOL_QUEUE_EINVAL);

  /* Submit; a job no worker runs yet times out its wait; cancel one. */
  spool_queue_submit_options_init(&o);
  o.key = "first";
  CHECK_EQ(spool_queue_submit(p, "cq", "reverse", "abc", 3, &o, id, sizeof id), SPOOL_QUEUE_OK);
  CHECK(strcmp(id, "cq/1") == 0);
  char small[3];
  CHECK_EQ(spool_queue_submit(p, "cq", "reverse", "x", 1, NULL, small, sizeof small),
           SPOOL_QUEUE_EINVAL);
  CHECK_EQ(spool_queue_get(p, "cq/1", 10, &r), SPOOL_QUEUE_ETIMEDOUT);
  char doomed[SPOOL_QUEUE_ID_MAX];
  CHECK_EQ(spool_queue_submit(p, "cq", "reverse", "zz", 2, NULL, doomed, sizeof doomed),
           SPOOL_QUEUE_OK);
  CHECK_EQ(spool_queue_cancel(p, doomed), SPOOL_QUEUE_OK);
  CHECK_EQ(spool_queue_cancel(p, doomed), SPOOL_QUEUE_ESTATE);
  CHECK_EQ(spool_queue_get(p, doomed, -1, &r), SPOOL_QUEUE_ECANCELED);

  /* A worker with C handlers. */
  spool_queue_worker* w = NULL;
  CHECK_EQ(spool_queue_worker_create(url, "bad queue", 1, &w), SPOOL_QUEUE_EINVAL);
  CHECK_EQ(spool_queue_worker_create(url, "cq", 2, &w), SPOOL_QUEUE_OK);
  int refusals = 0;
  CHECK_EQ(spool_queue_worker_handle(w, "reverse", reverse, NULL), SPOOL_QUEUE_OK);
  CHECK_EQ(spool_queue_worker_handle(w, "refuse", refuse, &refusals), SPOOL_QUEUE_OK);
  CHECK_EQ(spool_queue_worker_handle(w, "null", NULL, NULL), SPOOL_QUEUE_EINVAL);
  CHECK_EQ(spool_queue_worker_start(w), SPOOL_QUEUE_OK);
  CHECK_EQ(spool_queue_worker_handle(w, "late", reverse, NULL), SPOOL_QUEUE_EORDER);

  CHECK_EQ(spool_queue_get(p, "cq/1", -1, &r), SPOOL_QUEUE_OK);
  CHECK(r.data != NULL && strcmp(r.data, "cba") == 0);
  CHECK_EQ(r.size, 3);
  spool_queue_result_free(&r);
  CHECK(r.data == NULL);

  CHECK_EQ(spool_queue_submit(p, "cq", "refuse", "", 0, NULL, id, sizeof id), SPOOL_QUEUE_OK);
  CHECK_EQ(spool_queue_get(p, id, -1, &r), SPOOL_QUEUE_EFAILED);
  CHECK(r.data != NULL && strcmp(r.data, "refused in C") == 0);
  CHECK(strcmp(spool_queue_last_error(), "refused in C") == 0);
  spool_queue_result_free(&r);
  CHECK_EQ(refusals, 1);

  /* The same key: the first job, done. */
  spool_queue_submit_options_init(&o);
  o.key = "first";
  CHECK_EQ(spool_queue_submit(p, "cq", "reverse", "other", 5, &o, id, sizeof id), SPOOL_QUEUE_OK);
  CHECK(strcmp(id, "cq/1") == 0);

  CHECK_EQ(spool_queue_worker_stop(w), SPOOL_QUEUE_OK);
  spool_queue_worker_destroy(w);
  spool_queue_producer_destroy(p);

  CHECK(strcmp(spool_queue_strerror(SPOOL_QUEUE_EFULL), "the queue is full") == 0);
  CHECK(strcmp(spool_queue_strerror(SPOOL_QUEUE_OK), "success") == 0);
  CHECK(strcmp(spool_queue_strerror(999), "unknown spool_queue error") == 0);
  CHECK(strcmp(spool_queue_strerror(SPOOL_QUEUE_EVERSION),
               "Redis holds another spool build's queue functions") == 0);

  /* Another build's functions in Redis (a library under the queue's name whose spool_version
   * answers another version, loaded by redis-cli from a file): refused, and left in place. */
  char lua_path[] = "/tmp/spool-c-api-XXXXXX";
  const int lua_fd = mkstemp(lua_path);
  CHECK(lua_fd >= 0);
  const char lua[] =
      "#!lua name=spool_queue\n"
      "redis.register_function{function_name = 'spool_version', "
      "callback = function() return 'another' end, flags = {'no-writes'}}\n";
  CHECK_EQ(write(lua_fd, lua, sizeof lua - 1), (ssize_t)(sizeof lua - 1));
  close(lua_fd);
  char load[256];
  snprintf(load, sizeof load, "redis-cli -p %d -x FUNCTION LOAD REPLACE < %s > /dev/null", port,
           lua_path);
  CHECK_EQ(system(load), 0);
  unlink(lua_path);
  CHECK_EQ(spool_queue_producer_create(url, NULL, &p), SPOOL_QUEUE_OK);
  CHECK_EQ(spool_queue_submit(p, "cq", "reverse", "", 0, NULL, id, sizeof id),
           SPOOL_QUEUE_EVERSION);
  CHECK(strstr(spool_queue_last_error(), "version another") != NULL);
  spool_queue_producer_destroy(p);

  /* Redis gone: unavailable. */
  stop_redis();
  CHECK_EQ(spool_queue_producer_create(url, NULL, &p), SPOOL_QUEUE_OK);
  CHECK_EQ(spool_queue_submit(p, "cq", "reverse", "", 0, NULL, id, sizeof id),
           SPOOL_QUEUE_EUNAVAILABLE);
  spool_queue_producer_destroy(p);
  return check_report("test_c_api (queue)");
}
