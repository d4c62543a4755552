#include "wheelforge/core/name.hpp"

#include <gtest/gtest.h>

namespace wf::core {
namespace {

struct NameCase {
  std::string_view input;
  std::string_view normalized;
};

const NameCase kNormalizations[] = {
    {"flash-attn", "flash-attn"},
    {"flash_attn", "flash-attn"},
    {"Flash_Attn", "flash-attn"},
    {"FLASH.ATTN", "flash-attn"},
    {"friendly-bard", "friendly-bard"},
    {"Friendly-Bard", "friendly-bard"},
    {"FRIENDLY-BARD", "friendly-bard"},
    {"friendly.bard", "friendly-bard"},
    {"friendly_bard", "friendly-bard"},
    {"friendly--bard", "friendly-bard"},
    {"FrIeNdLy-._.-bArD", "friendly-bard"},
    {"zope.interface", "zope-interface"},
    {"torch", "torch"},
    {"xformers", "xformers"},
    {"a", "a"},
    {"A1", "a1"},
    {"-leading", "-leading"},
    {"trailing__", "trailing-"},
    {"", ""},
};

TEST(Name, NormalizesPerPep503) {
  for (const auto& row : kNormalizations) {
    EXPECT_EQ(normalize_name(row.input), row.normalized) << "input: \"" << row.input << "\"";
  }
}

TEST(Name, ValidProjectNames) {
  for (const auto name : {"a", "Z", "9", "ab", "a-b", "a_b", "a.b", "a--b", "a._-b", "flash-attn",
                          "Flash_Attn2", "zope.interface", "1password", "x1"}) {
    EXPECT_TRUE(is_valid_project_name(name)) << name;
  }
}

TEST(Name, InvalidProjectNames) {
  for (const auto name :
       {"",    "-",   "_",    ".",   "-a",  "a-",  "_a", "a_",          ".a",  "a.",
        "a b", "a/b", "a\\b", "a+b", "a@b", "a:b", "a!", "caf\xc3\xa9", "a\n", "\ta"}) {
    EXPECT_FALSE(is_valid_project_name(name)) << name;
  }
  EXPECT_FALSE(is_valid_project_name(std::string_view("a\0b", 3)));
}

TEST(Name, IsNormalizedName) {
  for (const auto name : {"flash-attn", "a", "a-b-c", "zope-interface", "torch2"}) {
    EXPECT_TRUE(is_normalized_name(name)) << name;
  }
  for (const auto name :
       {"Flash-Attn", "flash_attn", "flash.attn", "flash--attn", "-a", "a-", "", "a b", "A"}) {
    EXPECT_FALSE(is_normalized_name(name)) << name;
  }
}

TEST(Name, NormalizationIsIdempotent) {
  for (const auto& row : kNormalizations) {
    EXPECT_EQ(normalize_name(normalize_name(row.input)), row.normalized);
  }
}

TEST(EditDistance, CountsEditsAndStopsPastTheLimit) {
  EXPECT_EQ(edit_distance("flash-attn", "flash-attn", 3), 0U);
  EXPECT_EQ(edit_distance("flash-atn", "flash-attn", 3), 1U);
  EXPECT_EQ(edit_distance("flsah-attn", "flash-attn", 3), 1U);  // a swap
  EXPECT_EQ(edit_distance("fltsh-attn", "flash-attn", 3), 1U);
  EXPECT_EQ(edit_distance("flash-xttm", "flash-attn", 3), 2U);
  EXPECT_EQ(edit_distance("kitten", "sitting", 5), 3U);
  EXPECT_EQ(edit_distance("", "abc", 5), 3U);
  EXPECT_EQ(edit_distance("abc", "xyz", 1), 2U);     // limit + 1
  EXPECT_EQ(edit_distance("a", "abcdefgh", 2), 3U);  // lengths alone exceed it
}

TEST(SimilarNames, SuggestsCloseNormalizedNamesNearestFirst) {
  const std::vector<std::string> names = {"flash-attn",  "flash-attn-3", "xformers", "torch",
                                          "torchvision", "numpy",        "demo-pkg"};
  EXPECT_EQ(similar_names("flash-atn", names),
            (std::vector<std::string>{"flash-attn", "flash-attn-3"}));
  // Any spelling of the name is normalized first.
  EXPECT_EQ(similar_names("Flash_Atten", names)[0], "flash-attn");
  EXPECT_EQ(similar_names("flash", names),
            (std::vector<std::string>{"flash-attn", "flash-attn-3"}));
  EXPECT_EQ(similar_names("xformer", names), (std::vector<std::string>{"xformers"}));
  EXPECT_EQ(similar_names("torhc", names), (std::vector<std::string>{"torch"}));
  // The name itself is not suggested, and nothing far away is.
  EXPECT_TRUE(similar_names("torch", names).empty());
  EXPECT_TRUE(similar_names("requests", names).empty());
  EXPECT_TRUE(similar_names("ab", names).empty());
  EXPECT_EQ(similar_names("flash-attn-2", names, 1), (std::vector<std::string>{"flash-attn-3"}));
  EXPECT_EQ(edit_distance("torhc", "torch", 3), 1U);
}

}  // namespace
}  // namespace wf::core
