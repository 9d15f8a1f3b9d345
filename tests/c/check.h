/* check.h: the C tests' harness. CHECK and CHECK_EQ record a failure and carry on, so one run
 * reports every broken check; check_watchdog() turns a hang (a lost wake-up, a deadlock) into
 * a failure; check_report() prints the tally and gives main()'s exit status. */
#ifndef SPOOL_TESTS_C_CHECK_H
#define SPOOL_TESTS_C_CHECK_H

#include <signal.h>
#include <stdio.h>
#include <unistd.h>

static int failures = 0;

#define CHECK(cond)                                                            \
  do {                                                                         \
    if (!(cond)) {                                                             \
      fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
      ++failures;                                                              \
    }                                                                          \
  } while (0)

#define CHECK_EQ(actual, expected)                                                           \
  do {                                                                                       \
    long long a_ = (long long)(actual), e_ = (long long)(expected);                          \
    if (a_ != e_) {                                                                          \
      fprintf(stderr, "%s:%d: check failed: %s == %s (got %lld, expected %lld)\n", __FILE__, \
              __LINE__, #actual, #expected, a_, e_);                                         \
      ++failures;                                                                            \
    }                                                                                        \
  } while (0)

static void check_on_alarm(int sig) {
  (void)sig;
  static const char msg[] = "C test timed out; assuming a hang\n";
  ssize_t ignored = write(2, msg, sizeof msg - 1);
  (void)ignored;
  _exit(2);
}

/* Fails the program if it is still running after `seconds`. */
static void check_watchdog(unsigned seconds) {
  signal(SIGALRM, check_on_alarm);
  alarm(seconds);
}

static int check_report(const char* program) {
  if (failures != 0) {
    fprintf(stderr, "%s: %d check(s) failed\n", program, failures);
    return 1;
  }
  return 0;
}

#endif /* SPOOL_TESTS_C_CHECK_H */
