// Names, ids and URLs the queue accepts or refuses, without Redis.
#include <gtest/gtest.h>

#include <string>

#include "names.hpp"
#include "queue_fixture.hpp"

namespace {

using queue_test::error_of;
using queue_test::message_of;
using spool::queue::errc;
namespace d = spool::queue::detail;

TEST(QueueNames, AcceptsLettersDigitsAndPunctuation) {
  EXPECT_EQ(error_of([] { d::check_queue_name("mail.outgoing-2:eu_west"); }), errc{});
  EXPECT_EQ(error_of([] { d::check_queue_name(std::string(128, 'q')); }), errc{});
  EXPECT_EQ(error_of([] { d::check_task_name("send"); }), errc{});
}

TEST(QueueNames, RefusesSpacesEmptyLongAndOtherCharacters) {
  EXPECT_EQ(error_of([] { d::check_queue_name("my queue"); }), errc::invalid_argument);
  EXPECT_NE(message_of([] { d::check_queue_name("my queue"); }).find("a space is not allowed"),
            std::string::npos);
  EXPECT_EQ(error_of([] { d::check_queue_name(""); }), errc::invalid_argument);
  EXPECT_EQ(error_of([] { d::check_queue_name(std::string(129, 'q')); }), errc::invalid_argument);
  for (const char* bad : {"a/b", "a{b", "a}b", "tab\tq", "n\nq", "\xc3\xa9t\xc3\xa9"}) {
    EXPECT_EQ(error_of([bad] { d::check_queue_name(bad); }), errc::invalid_argument) << bad;
  }
  EXPECT_EQ(error_of([] { d::check_task_name("do it"); }), errc::invalid_argument);
}

TEST(QueueNames, KeysUpTo512BytesOfAnything) {
  EXPECT_EQ(error_of([] { d::check_job_key(std::string(512, '\0')); }), errc{});
  EXPECT_EQ(error_of([] { d::check_job_key(""); }), errc{});
  EXPECT_EQ(error_of([] { d::check_job_key(std::string(513, 'k')); }), errc::invalid_argument);
}

TEST(QueueNames, JobIdsSplitAtTheLastSlash) {
  const d::job_ref ref = d::parse_job_id("mail:eu/42");
  EXPECT_EQ(ref.queue, "mail:eu");
  EXPECT_EQ(ref.number, "42");
  EXPECT_EQ(ref.id(), "mail:eu/42");
  EXPECT_EQ(d::parse_job_id("q/bad-1700000000000-0").number, "bad-1700000000000-0");
  for (const char* bad : {"42", "q/", "/42", "q/4 2", "my q/1", "q/ABC", "q/1/"}) {
    EXPECT_EQ(error_of([bad] { d::parse_job_id(bad); }), errc::invalid_argument) << bad;
  }
}

TEST(QueueNames, PrefixPutsTheQueueInOneHashSlot) {
  EXPECT_EQ(d::queue_prefix("mail"), "spool:{mail}");
}

TEST(QueueUrls, MalformedOrNotRedisIsRefusedWithTheReason) {
  const auto refused = [](const char* url) {
    return error_of([url] { spool::queue::admin a(url); });
  };
  EXPECT_EQ(refused("redis://"), errc::invalid_argument);
  EXPECT_EQ(refused("redis://host:0"), errc::invalid_argument);
  EXPECT_EQ(refused("redis://host:99999"), errc::invalid_argument);
  EXPECT_EQ(refused("redis://host/0"), errc::invalid_argument);
  EXPECT_EQ(refused("redis-sentinel://h1,h2"), errc::invalid_argument);
  EXPECT_EQ(refused("redis-sentinel://h1/"), errc::invalid_argument);
  EXPECT_EQ(refused("http://localhost"), errc::invalid_argument);
  EXPECT_EQ(refused(""), errc::invalid_argument);
  EXPECT_NE(message_of([] {
              spool::queue::producer p("sqlite:/tmp/x.db");
            }).find("the queue lives in Redis"),
            std::string::npos);
  EXPECT_NE(message_of([] { spool::queue::admin a("redis://host:0"); }).find("port"),
            std::string::npos);
}

TEST(QueueUrls, WellFormedUrlsDoNotConnectYet) {
  // Nothing listens there; constructing does not connect, so nothing fails yet.
  EXPECT_EQ(error_of([] { spool::queue::admin a("redis://127.0.0.1:1"); }), errc{});
  EXPECT_EQ(error_of([] { spool::queue::producer p("redis://[::1]:1"); }), errc{});
  EXPECT_EQ(
      error_of([] { spool::queue::admin a("redis-sentinel://127.0.0.1:1,127.0.0.2:1/mymaster"); }),
      errc{});
}

TEST(QueueErrors, CodesHaveWordsAndCompareWithErrc) {
  const spool::queue::error e(errc::full, "queue q is full");
  EXPECT_EQ(e.code(), errc::full);
  EXPECT_NE(std::string(e.what()).find("queue q is full"), std::string::npos);
  const spool::queue::job_failed f("boom");
  EXPECT_STREQ(f.what(), "boom");
  EXPECT_EQ(f.code(), errc::job_failed);
  const spool::queue::job_cancelled c;
  EXPECT_EQ(c.code(), spool::errc::cancelled);
  EXPECT_EQ(spool::queue::job_state_from("dead"), spool::queue::job_state::dead);
  EXPECT_EQ(error_of([] { spool::queue::job_state_from("zombie"); }), errc::invalid_argument);
}

}  // namespace
