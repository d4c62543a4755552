#include "archive/member_checks.hpp"

#include <gtest/gtest.h>

namespace wf::archive {
namespace {

std::string problems_of(std::string_view name) {
  CappedProblems problems;
  const bool clean = check_member_name(name, problems);
  EXPECT_EQ(clean, problems.empty());
  return problems.empty() ? std::string() : problems.to_error().message;
}

TEST(MemberNameTest, AcceptsOrdinaryNames) {
  EXPECT_EQ(problems_of("demo_pkg/__init__.py"), "");
  EXPECT_EQ(problems_of("demo_pkg/"), "");
  EXPECT_EQ(problems_of("demo_pkg-1.0.data/scripts/run"), "");
  EXPECT_EQ(problems_of("d\xc3\xa9mo/caf\xc3\xa9.txt"), "");
  EXPECT_EQ(problems_of("..hidden/x..y"), "");
}

TEST(MemberNameTest, NamesEachBrokenRule) {
  EXPECT_EQ(problems_of(""), "member name '' is empty");
  EXPECT_EQ(problems_of("/abs"), "member name '/abs' is absolute");
  EXPECT_EQ(problems_of("C:/abs"), "member name 'C:/abs' is absolute");
  EXPECT_EQ(problems_of("a/../b"), "member name 'a/../b' contains a '..' component");
  EXPECT_EQ(problems_of(".."), "member name '..' contains a '..' component");
  EXPECT_EQ(problems_of("./a"), "member name './a' contains a '.' component");
  EXPECT_EQ(problems_of("a//b"), "member name 'a//b' contains an empty path component");
  EXPECT_EQ(problems_of("a\\b"), "member name 'a\\b' contains a backslash");
  EXPECT_EQ(problems_of(std::string_view("a\0b", 3)),
            "member name 'a?b' contains a control character");
  EXPECT_EQ(problems_of("a\x7f"), "member name 'a?' contains a control character");
  EXPECT_EQ(problems_of("..\\..\\x"), "member name '..\\..\\x' contains a backslash");
}

TEST(MemberNameTest, TopComponent) {
  EXPECT_EQ(top_component("a/b/c"), "a");
  EXPECT_EQ(top_component("a/"), "a");
  EXPECT_EQ(top_component("a"), "a");
}

TEST(CappedProblemsTest, KeepsTheFirstProblemsAndCountsTheRest) {
  CappedProblems problems(2);
  EXPECT_TRUE(problems.empty());
  for (int i = 0; i < 5; ++i) problems.add("p" + std::to_string(i));
  EXPECT_FALSE(problems.empty());
  const Error error = problems.to_error();
  EXPECT_EQ(error.code, Errc::invalid);
  EXPECT_EQ(error.message, "p0; p1; and 3 more problems");
}

}  // namespace
}  // namespace wf::archive
