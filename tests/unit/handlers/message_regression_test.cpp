// Regressions found by tests/fuzz/http_read_fuzz.cpp.

#include <gtest/gtest.h>

#include <string>

#include "wheelforge/handlers/message.hpp"

namespace wf::handlers {
namespace {

using namespace std::string_literals;

// parse_target promises Errc::invalid for NUL bytes, but only rejected an escaped %00: a raw
// NUL byte went through into the decoded segments (and the query).
TEST(ParseTargetRegression, RejectsRawNulInPath) {
  const auto parsed = parse_target("/simple/a\0b/"s);
  ASSERT_FALSE(parsed.ok());
  EXPECT_EQ(parsed.error().code, Errc::invalid);
}

TEST(ParseTargetRegression, RejectsRawNulInQuery) {
  const auto parsed = parse_target("/simple/?format=a\0b"s);
  ASSERT_FALSE(parsed.ok());
  EXPECT_EQ(parsed.error().code, Errc::invalid);
}

TEST(ParseTargetRegression, StillRejectsEscapedNul) {
  EXPECT_FALSE(parse_target("/simple/a%00b/").ok());
}

}  // namespace
}  // namespace wf::handlers
