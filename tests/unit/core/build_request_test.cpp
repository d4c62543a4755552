#include <gtest/gtest.h>

#include "wheelforge/core/build.hpp"

namespace wf::core {
namespace {

TEST(CheckBuildRequest, TrimsAndKeepsTheSubsetWhenAnAxisIsNamed) {
  BuildRequestFields f;
  f.recipe = "  flash-attn\t";
  f.version = " 2.8.3 ";
  f.force = true;
  auto r = check_build_request(f);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->recipe, "flash-attn");
  EXPECT_EQ(r->version, "2.8.3");
  EXPECT_TRUE(r->force);
  EXPECT_EQ(r->yank_superseded, std::nullopt);
  EXPECT_FALSE(r->subset);
  f.yank_superseded = false;
  r = check_build_request(f);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->yank_superseded, false);

  f.cuda = {"12.8", "13.0"};
  r = check_build_request(f);
  ASSERT_TRUE(r);
  ASSERT_TRUE(r->subset);
  EXPECT_TRUE(r->subset->python.empty());
  ASSERT_EQ(r->subset->cuda.size(), 2U);
  EXPECT_EQ(r->subset->cuda[1].str(), "13.0");
}

TEST(CheckBuildRequest, EveryProblemAtOnceAfterTheCallersOwn) {
  BuildRequestFields f;
  f.recipe = "   ";
  f.python = {"3.12", "three"};
  f.torch = {"2.8", "2.x"};
  f.cuda = {"cu128"};
  Problems earlier;
  earlier.add("unknown field 'x'");
  const auto r = check_build_request(f, earlier);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, Errc::invalid);
  EXPECT_EQ(r.error().message,
            "unknown field 'x'; missing recipe; missing version; python 'three' is not X.Y like "
            "3.12; torch '2.x' is not a series like 2.8; cuda 'cu128' is not a version like 12.8");
}

TEST(CheckBuildRequest, ValuesAreSanitizedInMessages) {
  BuildRequestFields f;
  f.recipe = "r";
  f.version = "1";
  f.torch = {"2.8\n\x1b[31m"};
  const auto r = check_build_request(f);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().message.find('\n'), std::string::npos);
  EXPECT_EQ(r.error().message.find('\x1b'), std::string::npos);
}

}  // namespace
}  // namespace wf::core
