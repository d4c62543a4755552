#include "wheelforge/core/filename.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace wf::core {
namespace {

using Strings = std::vector<std::string>;

struct WheelCase {
  std::string_view filename;
  std::string_view name;
  std::string_view normalized_name;
  std::string_view version_text;
  std::string_view version;  // normalized
  std::optional<std::string_view> build_tag;
  std::string_view python_tag;
  std::string_view abi_tag;
  std::string_view platform_tag;
};

const WheelCase kWheels[] = {
    {"flash_attn-2.8.3-cp312-cp312-linux_x86_64.whl", "flash_attn", "flash-attn", "2.8.3", "2.8.3",
     std::nullopt, "cp312", "cp312", "linux_x86_64"},
    {"flash_attn-2.8.3+cu128torch2.8cxx11abiTRUE-cp312-cp312-linux_x86_64.whl", "flash_attn",
     "flash-attn", "2.8.3+cu128torch2.8cxx11abiTRUE", "2.8.3+cu128torch2.8cxx11abitrue",
     std::nullopt, "cp312", "cp312", "linux_x86_64"},
    {"torch-2.8.0+cu128-cp311-cp311-manylinux_2_28_x86_64.whl", "torch", "torch", "2.8.0+cu128",
     "2.8.0+cu128", std::nullopt, "cp311", "cp311", "manylinux_2_28_x86_64"},
    {"xformers-0.0.32.post2-cp39-abi3-manylinux_2_17_x86_64.manylinux2014_x86_64.whl", "xformers",
     "xformers", "0.0.32.post2", "0.0.32.post2", std::nullopt, "cp39", "abi3",
     "manylinux_2_17_x86_64.manylinux2014_x86_64"},
    {"foo-1.0-1-py3-none-any.whl", "foo", "foo", "1.0", "1.0", "1", "py3", "none", "any"},
    {"foo-1.0-2abc-py2.py3-none-any.whl", "foo", "foo", "1.0", "1.0", "2abc", "py2.py3", "none",
     "any"},
    {"Foo_Bar-1.0rc1-cp310.cp311-cp310.cp311-win_amd64.whl", "Foo_Bar", "foo-bar", "1.0rc1",
     "1.0rc1", std::nullopt, "cp310.cp311", "cp310.cp311", "win_amd64"},
    {"zope.interface-5.0-py3-none-any.whl", "zope.interface", "zope-interface", "5.0", "5.0",
     std::nullopt, "py3", "none", "any"},
    {"pkg-1!2.0.dev3-py3-none-any.whl", "pkg", "pkg", "1!2.0.dev3", "1!2.0.dev3", std::nullopt,
     "py3", "none", "any"},
    {"pkg-1.0_post1-py3-none-any.whl", "pkg", "pkg", "1.0_post1", "1.0.post1", std::nullopt, "py3",
     "none", "any"},
    {"numpy-2.1.0-cp313-cp313t-macosx_14_0_arm64.whl", "numpy", "numpy", "2.1.0", "2.1.0",
     std::nullopt, "cp313", "cp313t", "macosx_14_0_arm64"},
};

TEST(Filename, ParsesWheels) {
  for (const auto& row : kWheels) {
    const auto parsed = parse_dist_filename(row.filename);
    ASSERT_TRUE(parsed.ok()) << row.filename << ": " << parsed.error().message;
    EXPECT_EQ(parsed->kind, DistKind::wheel);
    EXPECT_EQ(parsed->filename, row.filename);
    EXPECT_EQ(parsed->name, row.name) << row.filename;
    EXPECT_EQ(parsed->normalized_name, row.normalized_name) << row.filename;
    EXPECT_EQ(parsed->version_text, row.version_text) << row.filename;
    EXPECT_EQ(parsed->version.str(), row.version) << row.filename;
    EXPECT_EQ(parsed->tags.build_tag, row.build_tag) << row.filename;
    EXPECT_EQ(parsed->tags.python_tag, row.python_tag) << row.filename;
    EXPECT_EQ(parsed->tags.abi_tag, row.abi_tag) << row.filename;
    EXPECT_EQ(parsed->tags.platform_tag, row.platform_tag) << row.filename;
  }
}

TEST(Filename, ExpandsCompressedTagSets) {
  const auto parsed = parse_dist_filename(
      "xformers-0.0.32-cp39.cp310-abi3.none-manylinux_2_17_x86_64.manylinux2014_x86_64.whl");
  ASSERT_TRUE(parsed.ok()) << parsed.error().message;
  EXPECT_EQ(parsed->tags.python_tags(), (Strings{"cp39", "cp310"}));
  EXPECT_EQ(parsed->tags.abi_tags(), (Strings{"abi3", "none"}));
  EXPECT_EQ(parsed->tags.platform_tags(),
            (Strings{"manylinux_2_17_x86_64", "manylinux2014_x86_64"}));

  const auto single = parse_dist_filename("foo-1.0-py3-none-any.whl");
  ASSERT_TRUE(single.ok());
  EXPECT_EQ(single->tags.python_tags(), (Strings{"py3"}));
  EXPECT_EQ(single->tags.platform_tags(), (Strings{"any"}));
}

struct SdistCase {
  std::string_view filename;
  std::string_view name;
  std::string_view normalized_name;
  std::string_view version_text;
};

const SdistCase kSdists[] = {
    {"flash_attn-2.8.3.tar.gz", "flash_attn", "flash-attn", "2.8.3"},
    {"foo-1.0.tar.gz", "foo", "foo", "1.0"},
    {"zope.interface-5.0.tar.gz", "zope.interface", "zope-interface", "5.0"},
    // Legacy sdists kept the dashes of the project name.
    {"flash-attn-2.8.3.tar.gz", "flash-attn", "flash-attn", "2.8.3"},
    {"my-long-name-1.0rc1.tar.gz", "my-long-name", "my-long-name", "1.0rc1"},
    {"pkg-1.0+local.1.tar.gz", "pkg", "pkg", "1.0+local.1"},
};

TEST(Filename, ParsesSdists) {
  for (const auto& row : kSdists) {
    const auto parsed = parse_dist_filename(row.filename);
    ASSERT_TRUE(parsed.ok()) << row.filename << ": " << parsed.error().message;
    EXPECT_EQ(parsed->kind, DistKind::sdist);
    EXPECT_EQ(parsed->filename, row.filename);
    EXPECT_EQ(parsed->name, row.name);
    EXPECT_EQ(parsed->normalized_name, row.normalized_name);
    EXPECT_EQ(parsed->version_text, row.version_text);
    EXPECT_EQ(parsed->version, Version::parse(row.version_text).value());
    EXPECT_FALSE(parsed->tags.build_tag.has_value());
    EXPECT_TRUE(parsed->tags.python_tag.empty());
    EXPECT_TRUE(parsed->tags.python_tags().empty());
    EXPECT_TRUE(parsed->tags.abi_tags().empty());
    EXPECT_TRUE(parsed->tags.platform_tags().empty());
  }
}

struct RejectCase {
  std::string filename;
  std::vector<std::string_view> expected;  // substrings of the message, all present
};

std::string repeat(char c, std::size_t n) {
  return std::string(n, c);
}

const std::vector<RejectCase>& reject_cases() {
  static const std::vector<RejectCase> cases = {
      {"", {"empty"}},
      {repeat('a', 248) + "-1.0.tar.gz", {"259 bytes long, the limit is 255"}},
      {"../foo-1.0-py3-none-any.whl", {"path separator", "\"..\"", "starts with '.'"}},
      {"dir/foo-1.0-py3-none-any.whl", {"path separator", "project name \"dir/foo\""}},
      {"dir\\foo-1.0-py3-none-any.whl", {"path separator"}},
      {std::string("foo-1.0-py3-none-any.whl\0.tar.gz", 32), {"control character"}},
      {"foo-1.0-py3-none-any\n.whl", {"control character", "platform tag \"any?\""}},
      {"foo-1.0-py3-none-any\x7F.whl", {"control character"}},
      {"caf\xc3\xa9-1.0-py3-none-any.whl", {"non-ASCII", "project name \"caf??\""}},
      {".foo-1.0.tar.gz", {"starts with '.'"}},
      {"foo..bar-1.0.tar.gz", {"\"..\""}},
      {"foo-1.0 -py3-none-any.whl", {"space", "version \"1.0 \""}},
      {"foo-1.0.exe", {"must end in .whl or .tar.gz"}},
      {"foo-1.0.WHL", {"must end in .whl or .tar.gz"}},
      {"foo-1.0.tar.bz2", {"must end in .whl or .tar.gz"}},
      {"foo-1.0.tgz", {"must end in .whl or .tar.gz"}},
      {"foo-1.0.zip", {"only .tar.gz sdists are accepted"}},
      {"foo-1.0-py3-none.whl", {"5 or 6 dash-separated parts", "got 4"}},
      {"foo-1.0-1-2-py3-none-any-x.whl", {"(7 with a PEP 825 variant label), got 8"}},
      // Seven parts: a build tag and a variant label, so the python tag comes fourth.
      {"foo-1.0-1-2-py3-none-any.whl", {"python tag \"2\" starts with a digit"}},
      // Six parts read as a variant label: no tag of the python set may start with a digit
      // either, or the file's key (its sets sorted, "02.py2") would read back as a build tag.
      {"foo-1.0-py2.02-py3-none-any.whl", {"python tag \"02\" starts with a digit"}},
      {"foo.whl", {"5 or 6 dash-separated parts", "got 1"}},
      {"foo-1.0~beta-py3-none-any.whl", {"version \"1.0~beta\" is not a valid PEP 440 version"}},
      {"foo-latest-py3-none-any.whl", {"version \"latest\""}},
      // Six parts whose third does not start with a digit: a variant label comes last.
      {"foo-1.0-abc-py3-none-Any.whl", {"variant label \"Any\"", "PEP 825"}},
      {"foo-1.0-py3-none-any-x86-64.whl", {"build tag \"py3\""}},
      {"foo-1.0-1-py3-none-any-cu+128.whl", {"variant label \"cu+128\""}},
      {"foo-1.0-py3-none-any-.whl", {"variant label \"\""}},
      {"foo-1.0--py3-none-any.whl", {"build tag \"\""}},
      {"foo-1.0-1+x-py3-none-any.whl", {"build tag \"1+x\""}},
      {"foo-1.0-py3--any.whl", {"abi tag \"\""}},
      {"foo-1.0-py+3-none-any.whl", {"python tag \"py+3\""}},
      {"foo-1.0-.py3-none-any.whl", {"python tag \".py3\""}},
      {"foo-1.0-py3-none-any..whl", {"\"..\"", "platform tag \"any.\""}},
      {"foo-1.0-py3-none-linux@x86.whl", {"platform tag \"linux@x86\""}},
      {"_foo-1.0-py3-none-any.whl", {"project name \"_foo\""}},
      {"-1.0-py3-none-any.whl", {"project name \"\""}},
      {"foo_-1.0.tar.gz", {"project name \"foo_\""}},
      {"foo.tar.gz", {"an sdist name is {name}-{version}.tar.gz"}},
      {"foo-.tar.gz", {"version \"\""}},
      {"-1.0.tar.gz", {"project name \"\""}},
      {"foo-bar.tar.gz", {"version \"bar\""}},
      // Every problem is reported at once.
      {"Bad Name-x.y-1zz-py 3-none-any.whl",
       {"space", "project name \"Bad Name\"", "version \"x.y\"", "python tag \"py 3\""}},
  };
  return cases;
}

TEST(Filename, RejectsInvalidNamesWithEveryReason) {
  for (const auto& row : reject_cases()) {
    const auto parsed = parse_dist_filename(row.filename);
    ASSERT_FALSE(parsed.ok()) << "accepted: " << row.filename;
    EXPECT_EQ(parsed.error().code, Errc::invalid);
    const std::string& message = parsed.error().message;
    for (const auto expected : row.expected) {
      EXPECT_NE(message.find(expected), std::string::npos)
          << "file name: " << row.filename << "\nmessage: " << message
          << "\nexpected to contain: " << expected;
    }
  }
}

TEST(Filename, MessagesAreSafeToLog) {
  for (const auto& row : reject_cases()) {
    const auto parsed = parse_dist_filename(row.filename);
    ASSERT_FALSE(parsed.ok());
    for (const char c : parsed.error().message) {
      const auto u = static_cast<unsigned char>(c);
      EXPECT_TRUE(u >= 0x20 && u < 0x7F) << "unsafe byte in message for " << row.filename;
    }
    EXPECT_LE(parsed.error().message.size(), 2000U);
  }
}

TEST(Filename, MessageQuotesTheFileName) {
  const auto parsed = parse_dist_filename("foo-1.0-py3-none-any.exe");
  ASSERT_FALSE(parsed.ok());
  EXPECT_EQ(parsed.error().message,
            "invalid file name \"foo-1.0-py3-none-any.exe\": file name must end in .whl or "
            ".tar.gz");
}

TEST(Filename, LengthLimitIsInclusive) {
  // 255 bytes exactly is accepted; one more is not.
  const std::string stem = "-1.0-py3-none-any.whl";
  const std::string longest = repeat('a', kMaxFilenameLength - stem.size()) + stem;
  ASSERT_EQ(longest.size(), kMaxFilenameLength);
  EXPECT_TRUE(parse_dist_filename(longest).ok());
  EXPECT_FALSE(parse_dist_filename("a" + longest).ok());
}

TEST(Filename, VeryLongInputIsRejectedWithABoundedMessage) {
  const std::string huge = repeat('a', 100000) + "-1.0-py3-none-any.whl";
  const auto parsed = parse_dist_filename(huge);
  ASSERT_FALSE(parsed.ok());
  EXPECT_NE(parsed.error().message.find("the limit is 255"), std::string::npos);
  EXPECT_LT(parsed.error().message.size(), 1000U);
}

std::string key(std::string_view filename) {
  const auto parsed = parse_dist_filename(filename);
  EXPECT_TRUE(parsed.ok()) << filename;
  return parsed.ok() ? canonical_file_key(*parsed) : std::string();
}

TEST(CanonicalFileKey, SpellingsOfOneFileShareTheKey) {
  const std::vector<std::vector<std::string_view>> same = {
      // Project name: PEP 503 normalization, PEP 427 escaping.
      {"demo_pkg-1.0-py3-none-any.whl", "Demo_Pkg-1.0-py3-none-any.whl",
       "demo.pkg-1.0-py3-none-any.whl", "DEMO__pkg-1.0-py3-none-any.whl"},
      // Version: PEP 440 equality.
      {"demo-1.0-py3-none-any.whl", "demo-1.0.0-py3-none-any.whl", "demo-1-py3-none-any.whl"},
      {"demo-1.0rc1-py3-none-any.whl", "demo-1.0.0RC1-py3-none-any.whl",
       "demo-1.0c1-py3-none-any.whl"},
      {"kern-2.8.3+cu128torch2.8-cp312-cp312-linux_x86_64.whl",
       "kern-2.8.3+CU128TORCH2.8-cp312-cp312-linux_x86_64.whl",
       "kern-2.8.3.0+cu128torch2.8-cp312-cp312-linux_x86_64.whl"},
      // Compressed tag sets: sets, case-insensitive.
      {"demo-1.0-py2.py3-none-any.whl", "demo-1.0-py3.py2-none-any.whl",
       "demo-1.0-PY3.py2.py3-none-ANY.whl"},
      {"demo-1.0-cp311-cp311-manylinux_2_17_x86_64.manylinux2014_x86_64.whl",
       "demo-1.0-cp311-cp311-manylinux2014_x86_64.manylinux_2_17_x86_64.whl"},
      // Build tags by number and rest.
      {"demo-1.0-1-py3-none-any.whl", "demo-1.0-01-py3-none-any.whl"},
      {"demo-1.0-2abc-py3-none-any.whl", "demo-1.0-002abc-py3-none-any.whl"},
      // One sdist per release, however its name is spelled.
      {"demo_pkg-1.0.tar.gz", "Demo.Pkg-1.0.0.tar.gz", "demo-pkg-1.0.tar.gz"},
  };
  for (const auto& group : same) {
    for (const auto name : group) {
      EXPECT_EQ(key(name), key(group.front())) << name << " vs " << group.front();
    }
  }
}

TEST(CanonicalFileKey, DifferentFilesHaveDifferentKeys) {
  const std::vector<std::string_view> distinct = {
      "demo-1.0-py3-none-any.whl",
      "demo-1.0.1-py3-none-any.whl",
      "demo-1.0.post0-py3-none-any.whl",
      "demo-1.0+cu128-py3-none-any.whl",
      "demo-1.0+cu128.0-py3-none-any.whl",
      "demo-1.0-1-py3-none-any.whl",
      "demo-1.0-1a-py3-none-any.whl",
      "demo-1.0-py2.py3-none-any.whl",
      "demo-1.0-py3-abi3-any.whl",
      "demo-1.0-py3-none-linux_x86_64.whl",
      "demo-1.0-py3.cp311-none-any.whl",
      "demo_x-1.0-py3-none-any.whl",
      "demo-1.0.tar.gz",
      "demo-1.0.1.tar.gz",
      "demo-x-1.0.tar.gz",
  };
  std::vector<std::string> keys;
  for (const auto name : distinct) keys.push_back(key(name));
  for (std::size_t i = 0; i < keys.size(); ++i) {
    for (std::size_t j = i + 1; j < keys.size(); ++j) {
      EXPECT_NE(keys[i], keys[j]) << distinct[i] << " vs " << distinct[j];
    }
  }
}

TEST(CanonicalFileKey, ReadsLikeTheNormalizedFileName) {
  EXPECT_EQ(key("Demo.Pkg-1.0.0-py3.py2-none-any.whl"), "demo_pkg-1-py2.py3-none-any.whl");
  EXPECT_EQ(key("Foo-2.0-01x-cp311-cp311-linux_x86_64.whl"),
            "foo-2-1x-cp311-cp311-linux_x86_64.whl");
  EXPECT_EQ(key("Demo.Pkg-1.0.tar.gz"), "demo_pkg-1.tar.gz");
  // The string overload parses; a name that does not parse stands for itself.
  EXPECT_EQ(canonical_file_key(std::string_view("Demo.Pkg-1.0.tar.gz")), "demo_pkg-1.tar.gz");
  EXPECT_EQ(canonical_file_key(std::string_view("not a file name")), "not a file name");
}

TEST(RebuildKey, EveryBuildOfOneWheelSharesIt) {
  const auto rkey = [](std::string_view filename) {
    const auto parsed = parse_dist_filename(filename);
    EXPECT_TRUE(parsed.ok()) << filename;
    return parsed.ok() ? rebuild_key(*parsed) : std::string();
  };
  const std::string base = rkey("kern-2.8.3+cu128torch2.8-cp312-cp312-linux_x86_64.whl");
  EXPECT_EQ(base, key("kern-2.8.3+cu128torch2.8-cp312-cp312-linux_x86_64.whl"));
  for (const auto name : {"kern-2.8.3+cu128torch2.8-1-cp312-cp312-linux_x86_64.whl",
                          "Kern-2.8.3.0+CU128torch2.8-02-cp312-cp312-linux_x86_64.whl",
                          "kern-2.8.3+cu128torch2.8-3abc-cp312-cp312-linux_x86_64.whl"}) {
    EXPECT_EQ(rkey(name), base) << name;
  }
  // Another label, version, python, ABI or platform is another wheel.
  for (const auto name : {"kern-2.8.3+cu128torch2.9-1-cp312-cp312-linux_x86_64.whl",
                          "kern-2.8.4+cu128torch2.8-1-cp312-cp312-linux_x86_64.whl",
                          "kern-2.8.3+cu128torch2.8-1-cp311-cp311-linux_x86_64.whl",
                          "kern-2.8.3+cu128torch2.8-1-cp312-abi3-linux_x86_64.whl",
                          "kern-2.8.3+cu128torch2.8-1-cp312-cp312-manylinux_2_28_x86_64.whl"}) {
    EXPECT_NE(rkey(name), base) << name;
  }
  EXPECT_EQ(rkey("demo-1.0.tar.gz"), key("demo-1.0.tar.gz"));
}

TEST(BuildNumber, IsTheBuildTagsLeadingNumber) {
  const auto number = [](std::string_view filename) {
    const auto parsed = parse_dist_filename(filename);
    EXPECT_TRUE(parsed.ok()) << filename;
    return parsed.ok() ? build_number(parsed->tags) : 99U;
  };
  EXPECT_EQ(number("demo-1.0-py3-none-any.whl"), 0U);
  EXPECT_EQ(number("demo-1.0-1-py3-none-any.whl"), 1U);
  EXPECT_EQ(number("demo-1.0-02-py3-none-any.whl"), 2U);
  EXPECT_EQ(number("demo-1.0-12abc-py3-none-any.whl"), 12U);
  EXPECT_EQ(number("demo-1.0-999999999999999999-py3-none-any.whl"), 999999999999999999U);
  EXPECT_EQ(number("demo-1.0-9999999999999999999-py3-none-any.whl"), 0U) << "beyond 18 digits";
}

TEST(Filename, ParsesVariantLabels) {
  const auto plain = parse_dist_filename("foo-1.0-cp312-cp312-manylinux_2_28_x86_64.whl");
  ASSERT_TRUE(plain.ok());
  EXPECT_FALSE(plain->tags.variant_label.has_value());

  const auto variant =
      parse_dist_filename("torch-2.9.0-cp312-cp312-manylinux_2_28_x86_64-cu128.whl");
  ASSERT_TRUE(variant.ok()) << variant.error().message;
  EXPECT_EQ(variant->tags.variant_label, "cu128");
  EXPECT_FALSE(variant->tags.build_tag.has_value());
  EXPECT_EQ(variant->tags.python_tag, "cp312");
  EXPECT_EQ(variant->tags.platform_tag, "manylinux_2_28_x86_64");

  const auto both =
      parse_dist_filename("numpy-2.3.2-1-cp313-cp313t-musllinux_1_2_x86_64-x86_64_v3.whl");
  ASSERT_TRUE(both.ok()) << both.error().message;
  EXPECT_EQ(both->tags.build_tag, "1");
  EXPECT_EQ(both->tags.python_tag, "cp313");
  EXPECT_EQ(both->tags.abi_tag, "cp313t");
  EXPECT_EQ(both->tags.variant_label, "x86_64_v3");

  const auto null = parse_dist_filename("numpy-2.3.2-cp313-cp313t-musllinux_1_2_x86_64-null.whl");
  ASSERT_TRUE(null.ok());
  EXPECT_EQ(null->tags.variant_label, "null");

  // A build tag is still a build tag: six parts whose third starts with a digit.
  const auto build = parse_dist_filename("foo-1.0-2-py3-none-any.whl");
  ASSERT_TRUE(build.ok());
  EXPECT_EQ(build->tags.build_tag, "2");
  EXPECT_FALSE(build->tags.variant_label.has_value());
}

TEST(Filename, VariantLabelRules) {
  EXPECT_TRUE(is_valid_variant_label("cu128"));
  EXPECT_TRUE(is_valid_variant_label("x86_64_v3"));
  EXPECT_TRUE(is_valid_variant_label("a.b_c"));
  EXPECT_TRUE(is_valid_variant_label("averyveryverylonglabelbeyond16"));
  EXPECT_FALSE(is_valid_variant_label(""));
  EXPECT_FALSE(is_valid_variant_label("Cu128"));
  EXPECT_FALSE(is_valid_variant_label("cu-128"));
  EXPECT_FALSE(is_valid_variant_label("cu+128"));
}

TEST(Filename, VariantLabelIsPartOfTheFileKey) {
  const std::string plain = canonical_file_key("foo-1.0-py3-none-any.whl");
  const std::string cu128 = canonical_file_key("foo-1.0-py3-none-any-cu128.whl");
  const std::string cu126 = canonical_file_key("foo-1.0-py3-none-any-cu126.whl");
  EXPECT_NE(plain, cu128);
  EXPECT_NE(cu128, cu126);
  EXPECT_EQ(cu128, canonical_file_key("Foo-1.0.0-py3-none-any-cu128.whl"));
  // Non-variant keys are as they were.
  EXPECT_EQ(plain, "foo-1-py3-none-any.whl");
  const auto parsed = parse_dist_filename("foo-1.0-3-py3-none-any-cu128.whl");
  ASSERT_TRUE(parsed.ok());
  EXPECT_EQ(rebuild_key(*parsed), cu128);
}

}  // namespace
}  // namespace wf::core
