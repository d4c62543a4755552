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

}  // namespace
}  // namespace wf::core
