#include <gtest/gtest.h>

#include <string>

#include "http/access_log.hpp"

namespace wf::http {
namespace {

std::string line(std::string_view target, std::uint64_t micros, std::string_view failure = {}) {
  std::string out;
  append_access_line(out, 42, "192.0.2.7", "GET", target, 200, 1209, micros, failure);
  return out;
}

TEST(AccessLine, FormatsEveryField) {
  EXPECT_EQ(line("/simple/demo/", 1234), "req=42 192.0.2.7 GET /simple/demo/ -> 200 1209B 1.23ms");
  std::string out = "prefix ";
  append_access_line(out, 7, "", "PUT", "/upload/x.whl", 201, 0, 0);
  EXPECT_EQ(out, "prefix req=7 - PUT /upload/x.whl -> 201 0B 0.00ms");
}

TEST(AccessLine, RoundsMillisecondsToHundredths) {
  EXPECT_EQ(line("/", 4), "req=42 192.0.2.7 GET / -> 200 1209B 0.00ms");
  EXPECT_EQ(line("/", 5), "req=42 192.0.2.7 GET / -> 200 1209B 0.01ms");
  EXPECT_EQ(line("/", 999), "req=42 192.0.2.7 GET / -> 200 1209B 1.00ms");
  EXPECT_EQ(line("/", 1'234'567), "req=42 192.0.2.7 GET / -> 200 1209B 1234.57ms");
}

TEST(AccessLine, ReplacesUnprintableBytesAndCutsLongTargets) {
  EXPECT_EQ(line("/a\nb\x7f\xc3\xa9", 0), "req=42 192.0.2.7 GET /a?b??? -> 200 1209B 0.00ms");
  const std::string target = "/" + std::string(400, 'x');
  EXPECT_EQ(line(target, 0),
            "req=42 192.0.2.7 GET " + target.substr(0, 300) + "... -> 200 1209B 0.00ms");
  EXPECT_EQ(line("/" + std::string(299, 'y'), 0),
            "req=42 192.0.2.7 GET /" + std::string(299, 'y') + " -> 200 1209B 0.00ms");
}

TEST(AccessLine, NamesAWriteFailure) {
  EXPECT_EQ(line("/x", 10, "Broken pipe"),
            "req=42 192.0.2.7 GET /x -> 200 1209B 0.01ms (write failed: Broken pipe)");
}

}  // namespace
}  // namespace wf::http
