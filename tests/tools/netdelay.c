/* netdelay: holds every packet of one netfilter queue for a fixed time, then lets it go.
 *
 *   netdelay QUEUE_NUM DELAY_MS
 *
 * Packets reach the queue through an iptables rule such as
 *   iptables -A OUTPUT -d 10.77.0.5 -j NFQUEUE --queue-num 7 --queue-bypass
 * and leave it in the order they came, each DELAY_MS after it arrived: a fixed one-way latency
 * on the chosen path, for kernels without the netem qdisc. Only the packet's id is copied to
 * user space; the payload stays in the kernel. Runs until SIGTERM or SIGINT, then releases
 * what it holds at once. Prints "netdelay: ready" on stdout once the queue is bound, so that a
 * caller can wait for it. */
#define _POSIX_C_SOURCE 200809L

#include <arpa/inet.h>
#include <errno.h>
#include <libnetfilter_queue/libnetfilter_queue.h>
#include <linux/netfilter.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { max_held = 1 << 16 };

struct held {
  uint32_t id;
  int64_t due_ns;
};

static struct held ring[max_held];
static size_t head, count;
static int64_t delay_ns;
static volatile sig_atomic_t stopping;

static int64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void on_signal(int sig) {
  (void)sig;
  stopping = 1;
}

static int on_packet(struct nfq_q_handle* qh, struct nfgenmsg* msg, struct nfq_data* nfa,
                     void* data) {
  (void)msg;
  (void)data;
  struct nfqnl_msg_packet_hdr* ph = nfq_get_msg_packet_hdr(nfa);
  if (ph == NULL) return 0;
  uint32_t id = ntohl(ph->packet_id);
  if (count == max_held) /* full: let it pass undelayed rather than lose it */
    return nfq_set_verdict(qh, id, NF_ACCEPT, 0, NULL);
  ring[(head + count) % max_held] = (struct held){id, now_ns() + delay_ns};
  ++count;
  return 0;
}

static void release_due(struct nfq_q_handle* qh, int all) {
  int64_t now = now_ns();
  while (count > 0 && (all || ring[head].due_ns <= now)) {
    nfq_set_verdict(qh, ring[head].id, NF_ACCEPT, 0, NULL);
    head = (head + 1) % max_held;
    --count;
  }
}

int main(int argc, char** argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: netdelay QUEUE_NUM DELAY_MS\n");
    return 2;
  }
  char* end;
  long queue = strtol(argv[1], &end, 10);
  if (*end != '\0' || queue < 0 || queue > 65535) {
    fprintf(stderr, "netdelay: queue number %s is not 0..65535\n", argv[1]);
    return 2;
  }
  long ms = strtol(argv[2], &end, 10);
  if (*end != '\0' || ms < 0 || ms > 60000) {
    fprintf(stderr, "netdelay: delay %s is not 0..60000 ms\n", argv[2]);
    return 2;
  }
  delay_ns = (int64_t)ms * 1000000;

  struct nfq_handle* h = nfq_open();
  if (h == NULL) {
    perror("netdelay: nfq_open");
    return 1;
  }
  struct nfq_q_handle* qh = nfq_create_queue(h, (uint16_t)queue, on_packet, NULL);
  if (qh == NULL) {
    fprintf(stderr, "netdelay: cannot bind queue %ld (another program holds it?)\n", queue);
    return 1;
  }
  if (nfq_set_mode(qh, NFQNL_COPY_META, 0) < 0 || nfq_set_queue_maxlen(qh, max_held) < 0) {
    perror("netdelay: configuring the queue");
    return 1;
  }
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_signal;
  sigaction(SIGTERM, &sa, NULL);
  sigaction(SIGINT, &sa, NULL);
  printf("netdelay: ready\n");
  fflush(stdout);

  int fd = nfq_fd(h);
  char buf[4096];
  while (!stopping) {
    int timeout_ms = -1;
    if (count > 0) {
      int64_t wait = ring[head].due_ns - now_ns();
      timeout_ms = wait <= 0 ? 0 : (int)((wait + 999999) / 1000000);
    }
    struct pollfd p = {.fd = fd, .events = POLLIN};
    int n = poll(&p, 1, timeout_ms);
    if (n < 0 && errno != EINTR) {
      perror("netdelay: poll");
      break;
    }
    if (n > 0) {
      for (;;) {
        ssize_t got = recv(fd, buf, sizeof buf, MSG_DONTWAIT);
        if (got < 0) {
          if (errno == ENOBUFS) continue; /* the kernel dropped some: keep going */
          break;
        }
        nfq_handle_packet(h, buf, (int)got);
      }
    }
    release_due(qh, 0);
  }
  release_due(qh, 1);
  nfq_destroy_queue(qh);
  nfq_close(h);
  return 0;
}
