#include "wheelforge/core/version.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace wf::core {
namespace {

Version v(std::string_view text) {
  auto parsed = Version::parse(text);
  EXPECT_TRUE(parsed.ok()) << text << ": " << (parsed.ok() ? "" : parsed.error().message);
  return parsed.ok() ? parsed.value() : Version{};
}

struct Normalization {
  std::string_view input;
  std::string_view normalized;
};

// Every spelling PEP 440 permits, with the normal form it must produce.
const Normalization kVersionNormalizations[] = {
    {"1.0", "1.0"},
    {"1.0.0", "1.0.0"},
    {"01.02.003", "1.2.3"},
    {"v1.0", "1.0"},
    {"V1.0", "1.0"},
    {"  1.0  ", "1.0"},
    {"\t1.0\n", "1.0"},
    {"\r\n1.0\f\v", "1.0"},
    {"1!1.0", "1!1.0"},
    {"0!1.0", "1.0"},
    {"v1!2.0", "1!2.0"},
    {"1.0a1", "1.0a1"},
    {"1.0A1", "1.0a1"},
    {"1.0alpha1", "1.0a1"},
    {"1.0ALPHA1", "1.0a1"},
    {"1.0.a1", "1.0a1"},
    {"1.0-a1", "1.0a1"},
    {"1.0_a1", "1.0a1"},
    {"1.0a.1", "1.0a1"},
    {"1.0a-1", "1.0a1"},
    {"1.0a_1", "1.0a1"},
    {"1.0a", "1.0a0"},
    {"1.0alpha", "1.0a0"},
    {"1.0a-", "1.0a0"},
    {"1.0b2", "1.0b2"},
    {"1.0beta2", "1.0b2"},
    {"1.0.beta.2", "1.0b2"},
    {"1.0c3", "1.0rc3"},
    {"1.0rc3", "1.0rc3"},
    {"1.0RC3", "1.0rc3"},
    {"1.0pre3", "1.0rc3"},
    {"1.0preview3", "1.0rc3"},
    {"1.0-preview-3", "1.0rc3"},
    {"1.0PREVIEW", "1.0rc0"},
    {"1.0pre", "1.0rc0"},
    {"1.0.post1", "1.0.post1"},
    {"1.0post1", "1.0.post1"},
    {"1.0-post1", "1.0.post1"},
    {"1.0_post_1", "1.0.post1"},
    {"1.0.post", "1.0.post0"},
    {"1.0post", "1.0.post0"},
    {"1.0-post", "1.0.post0"},
    {"1.0.rev1", "1.0.post1"},
    {"1.0r1", "1.0.post1"},
    {"1.0-r1", "1.0.post1"},
    {"1.0-1", "1.0.post1"},
    {"1.0.POST1", "1.0.post1"},
    {"1.0post-", "1.0.post0"},
    {"1.0.dev1", "1.0.dev1"},
    {"1.0dev1", "1.0.dev1"},
    {"1.0-dev1", "1.0.dev1"},
    {"1.0_dev_1", "1.0.dev1"},
    {"1.0.dev", "1.0.dev0"},
    {"1.0dev", "1.0.dev0"},
    {"1.0.DEV1", "1.0.dev1"},
    {"1.0rc1.post2.dev3", "1.0rc1.post2.dev3"},
    {"1.0RC1-2.DEV3", "1.0rc1.post2.dev3"},
    {"1.0a1-1-dev-1", "1.0a1.post1.dev1"},
    {"1.0a..post1", "1.0a0.post1"},
    {"1.0c1-1", "1.0rc1.post1"},
    {"1.0.a.1.post.2.dev.3", "1.0a1.post2.dev3"},
    {"1.0+abc", "1.0+abc"},
    {"1.0+ABC", "1.0+abc"},
    {"1.0+abc.1_2-x", "1.0+abc.1.2.x"},
    {"1.0+abc_1-X", "1.0+abc.1.x"},
    {"1.0+01", "1.0+1"},
    {"1.0+001.0a", "1.0+1.0a"},
    {"1.0+cu128torch2.8", "1.0+cu128torch2.8"},
    {"v2.8.3+CU128_torch2.8", "2.8.3+cu128.torch2.8"},
    {"1.0rc1.post2.dev3+cu128.torch2.8", "1.0rc1.post2.dev3+cu128.torch2.8"},
    {"2.8.3+cu128torch2.8.0.post2", "2.8.3+cu128torch2.8.0.post2"},
    {"2.8.3+20260126.cu129torch280cxx11abitrue.438325",
     "2.8.3+20260126.cu129torch280cxx11abitrue.438325"},
    {"1.0+cu12torch2.8cxx11abiTRUE", "1.0+cu12torch2.8cxx11abitrue"},
    {"1.0+cu130.torch29", "1.0+cu130.torch29"},
    {"1.0+gaa384b3c0.cu130", "1.0+gaa384b3c0.cu130"},
    {"1.0+cpu.cxx11.abi", "1.0+cpu.cxx11.abi"},
    {"18446744073709551615", "18446744073709551615"},
    {"1.0.post18446744073709551615", "1.0.post18446744073709551615"},
    {"000000000000000000000000001.0", "1.0"},
    {"1.0+00000000000000000000000007", "1.0+7"},
};

TEST(Version, NormalizesEveryPermittedSpelling) {
  for (const auto& row : kVersionNormalizations) {
    const auto parsed = Version::parse(row.input);
    ASSERT_TRUE(parsed.ok()) << "input: \"" << row.input << "\"";
    EXPECT_EQ(parsed->str(), row.normalized) << "input: \"" << row.input << "\"";
    // The normal form is a fixed point.
    EXPECT_EQ(v(parsed->str()).str(), row.normalized);
  }
}

const std::string_view kInvalid[] = {
    "",
    " ",
    "1.0.",
    ".1.0",
    "1.0-",
    "1..0",
    "1.0+",
    "1.0+a..b",
    "1.0+a.",
    "1.0+.a",
    "1.0+a b",
    "1.0+a+b",
    "1.0+a@b",
    "1.0prev1",
    "1.0-1-1",
    "a1.0",
    "1.0x",
    "1.0 .dev1",
    "1.0.dev1.post1",
    "1.0.post1.a1",
    "1!",
    "!1.0",
    "1!2!3",
    "1.0a1b2",
    "vv1.0",
    "1.0.0-rc1-beta",
    "1.0_",
    "1.0--1",
    "1,0",
    "v",
    "1.0+\xc3\xa9",
    "\xc3\xa9"
    "1.0",
    "1.0\xc2\xa0",
    // Overflow of uint64 in every kind of number.
    "18446744073709551616",
    "1.18446744073709551616",
    "18446744073709551616!1.0",
    "1.0a18446744073709551616",
    "1.0.post18446744073709551616",
    "1.0-18446744073709551616",
    "1.0.dev18446744073709551616",
    "1.0+18446744073709551616",
    "1.0+abc.99999999999999999999999",
};

TEST(Version, RejectsInvalidSpellings) {
  for (const auto input : kInvalid) {
    const auto parsed = Version::parse(input);
    EXPECT_FALSE(parsed.ok()) << "input: \"" << input << "\" parsed as " << parsed->str();
    if (!parsed.ok()) {
      EXPECT_EQ(parsed.error().code, Errc::invalid);
    }
  }
  EXPECT_FALSE(Version::parse(std::string_view("1.0\0", 4)).ok());
}

TEST(Version, ErrorQuotesTheInputSafely) {
  const auto parsed = Version::parse("1.0\nX-Injected: yes");
  ASSERT_FALSE(parsed.ok());
  EXPECT_EQ(parsed.error().message, "\"1.0?X-Injected: yes\" is not a valid PEP 440 version");
  const auto overflow = Version::parse("1.0.post99999999999999999999");
  ASSERT_FALSE(overflow.ok());
  EXPECT_NE(overflow.error().message.find("too large"), std::string::npos);
  EXPECT_NE(overflow.error().message.find("\"1.0.post99999999999999999999\""), std::string::npos);
}

TEST(Version, Components) {
  const Version x = v("3!1.2.3rc4.post5.dev6+Ubuntu-1.7");
  EXPECT_EQ(x.epoch(), 3U);
  EXPECT_EQ(x.release(), (std::vector<std::uint64_t>{1, 2, 3}));
  ASSERT_TRUE(x.pre().has_value());
  EXPECT_EQ(x.pre()->first, Version::PreKind::rc);
  EXPECT_EQ(x.pre()->second, 4U);
  EXPECT_EQ(x.post(), 5U);
  EXPECT_EQ(x.dev(), 6U);
  ASSERT_EQ(x.local().size(), 3U);
  EXPECT_EQ(std::get<std::string>(x.local()[0]), "ubuntu");
  EXPECT_EQ(std::get<std::uint64_t>(x.local()[1]), 1U);
  EXPECT_EQ(std::get<std::uint64_t>(x.local()[2]), 7U);
  EXPECT_TRUE(x.has_local());
  EXPECT_TRUE(x.is_prerelease());
  EXPECT_EQ(x.str(), "3!1.2.3rc4.post5.dev6+ubuntu.1.7");
  EXPECT_EQ(x.public_str(), "3!1.2.3rc4.post5.dev6");
  EXPECT_EQ(x.local_str(), "ubuntu.1.7");

  const Version plain = v("2.8.3");
  EXPECT_EQ(plain.epoch(), 0U);
  EXPECT_FALSE(plain.pre().has_value());
  EXPECT_FALSE(plain.post().has_value());
  EXPECT_FALSE(plain.dev().has_value());
  EXPECT_FALSE(plain.has_local());
  EXPECT_FALSE(plain.is_prerelease());
  EXPECT_EQ(plain.local_str(), "");
  EXPECT_EQ(plain.public_str(), "2.8.3");

  EXPECT_TRUE(v("1.0.dev0").is_prerelease());
  EXPECT_TRUE(v("1.0a1").is_prerelease());
  EXPECT_FALSE(v("1.0.post1").is_prerelease());
  EXPECT_EQ(v("1.0a").pre()->first, Version::PreKind::a);
  EXPECT_EQ(v("1.0beta").pre()->first, Version::PreKind::b);
  EXPECT_EQ(v("1.0c").pre()->first, Version::PreKind::rc);
}

TEST(Version, LocalLabelsSeenInCudaWheels) {
  EXPECT_EQ(v("2.8.3+cu128torch2.8").local_str(), "cu128torch2.8");
  EXPECT_EQ(v("2.8.3+cu128torch2.8").public_str(), "2.8.3");
  EXPECT_EQ(v("2.8.3+CU128_Torch2.8").local_str(), "cu128.torch2.8");
  EXPECT_EQ(v("2.8.3+pt28cu126").local_str(), "pt28cu126");
  EXPECT_EQ(v("2.8.3+cu130torch2.9.0andhigher.post4").local_str(),
            "cu130torch2.9.0andhigher.post4");
  EXPECT_EQ(v("0.0.29+rocm63torch2.6cxx11abiTRUE").local_str(), "rocm63torch2.6cxx11abitrue");
  EXPECT_EQ(v("1.0+cuda11.cudnn86").local_str(), "cuda11.cudnn86");
  EXPECT_EQ(v("1.0+cu130sm89torch2.10.0").local_str(), "cu130sm89torch2.10.0");
}

// Strictly ascending: every earlier entry sorts before every later one.
const std::string_view kAscending[] = {
    "0.1",
    "1.0.dev456",
    "1.0a1",
    "1.0a2.dev456",
    "1.0a12.dev456",
    "1.0a12",
    "1.0b1.dev456",
    "1.0b2",
    "1.0b2.post345.dev456",
    "1.0b2.post345",
    "1.0b2-346",
    "1.0c1.dev456",
    "1.0c1",
    "1.0rc2",
    "1.0c3",
    "1.0",
    "1.0+abc.5",
    "1.0+abc.7",
    "1.0+5",
    "1.0.post456.dev34",
    "1.0.post456",
    "1.0.1",
    "1.1.dev1",
    "1.2+123abc",
    "1.2+123abc456",
    "1.2+abc",
    "1.2+abc123",
    "1.2+abc123def",
    "1.2+1234.abc",
    "1.2+123456",
    "1.2.r32+123456",
    "1.2.rev33+123456",
    "2.8.3",
    "2.8.3+cu126torch2.8",
    "2.8.3+cu128torch2.8",
    "2.8.3+cu128torch2.8.0",
    "2.8.3+cu130torch2.9",
    "2.8.3+cu130torch2.10.0",
    "2.8.3+cu130torch2.11",
    "2.8.3.post1",
    "10.0",
    "18446744073709551615",
    "1!0.1",
    "1!1.0.dev456",
    "1!1.0a1",
    "1!1.0",
    "1!1.0.post456",
    "2!0.0.1",
};

TEST(Version, TotalOrderMatchesPep440) {
  std::vector<Version> versions;
  for (const auto text : kAscending) versions.push_back(v(text));
  for (std::size_t i = 0; i < versions.size(); ++i) {
    EXPECT_EQ(versions[i] <=> versions[i], std::strong_ordering::equal) << kAscending[i];
    for (std::size_t j = i + 1; j < versions.size(); ++j) {
      EXPECT_LT(versions[i], versions[j]) << kAscending[i] << " < " << kAscending[j];
      EXPECT_GT(versions[j], versions[i]) << kAscending[j] << " > " << kAscending[i];
      EXPECT_NE(versions[i], versions[j]) << kAscending[i] << " != " << kAscending[j];
    }
  }
}

TEST(Version, OrderingFromTheBrief) {
  const std::string_view chain[] = {
      "1.0.dev456",
      "1.0a1",
      "1.0a2.dev456",
      "1.0a12",
      "1.0b1.dev456",
      "1.0b2.post345.dev456",
      "1.0b2.post345",
      "1.0rc1",
      "1.0",
      "1.0+abc.5",
      "1.0+abc.7",
      "1.0+5",
      "1.0.post456.dev34",
      "1.0.post456",
      "1.1.dev1",
  };
  for (std::size_t i = 0; i + 1 < std::size(chain); ++i) {
    EXPECT_LT(v(chain[i]), v(chain[i + 1])) << chain[i] << " < " << chain[i + 1];
  }
}

TEST(Version, LocalLabelsCompareSegmentBySegment) {
  // Lexical within a segment: "cu130torch2" > "cu128torch2", whatever the torch series.
  EXPECT_LT(v("2.8.3+cu126torch2.8"), v("2.8.3+cu128torch2.8"));
  EXPECT_LT(v("2.8.3+cu128torch2.8"), v("2.8.3+cu130torch2.11"));
  // Numeric segments compare as integers, not as text.
  EXPECT_LT(v("1.0+abc.9"), v("1.0+abc.10"));
  EXPECT_LT(v("2.8.3+cu130torch2.9"), v("2.8.3+cu130torch2.11"));
  // A numeric segment sorts above an alphanumeric one.
  EXPECT_LT(v("1.0+zzz"), v("1.0+0"));
  EXPECT_LT(v("1.0+abc.zzz"), v("1.0+abc.1"));
  // A shorter label that is a prefix sorts first.
  EXPECT_LT(v("1.0+abc"), v("1.0+abc.0"));
  EXPECT_LT(v("1.0+cu128"), v("1.0+cu128.torch2.8"));
  // Any local label sorts after none, but before the next public version.
  EXPECT_LT(v("1.0"), v("1.0+0"));
  EXPECT_LT(v("1.0+zzz"), v("1.0.post0"));
  EXPECT_LT(v("1.0+999"), v("1.0.1"));
  // Separators and case do not matter.
  EXPECT_EQ(v("1.0+ABC-1_2"), v("1.0+abc.1.2"));
}

TEST(Version, EqualityIgnoresSpellingAndTrailingZeros) {
  EXPECT_EQ(v("1.0"), v("1"));
  EXPECT_EQ(v("1.0"), v("1.0.0.0"));
  EXPECT_EQ(v("0!1.0"), v("1.0"));
  EXPECT_EQ(v("1.0alpha"), v("1.0a0"));
  EXPECT_EQ(v("1.0-1"), v("1.0.post1"));
  EXPECT_EQ(v("v1.0RC1"), v("1.0rc1"));
  EXPECT_EQ(v("1.0+01"), v("1.0+1"));
  EXPECT_LT(v("1.0"), v("1.0.0.1"));
  EXPECT_LT(v("1.0+1"), v("1.0.0+2"));
  // Trailing zeros are kept in the normal form even though they do not change the order.
  EXPECT_EQ(v("1.0.0").str(), "1.0.0");
}

TEST(Version, PreDevPostInteractions) {
  EXPECT_LT(v("1.0.dev1"), v("1.0a0.dev0"));
  EXPECT_LT(v("1.0a1.dev1"), v("1.0a1"));
  EXPECT_LT(v("1.0a1"), v("1.0a1.post1.dev1"));
  EXPECT_LT(v("1.0a1.post1.dev1"), v("1.0a1.post1"));
  EXPECT_LT(v("1.0rc9"), v("1.0.post0.dev0"));
  EXPECT_LT(v("1.0.post0.dev0"), v("1.0.post0"));
  EXPECT_LT(v("1.0a9"), v("1.0b0"));
  EXPECT_LT(v("1.0b9"), v("1.0rc0"));
  EXPECT_LT(v("0.9.post9"), v("1.0.dev0"));
  EXPECT_LT(v("1.0.dev1"), v("1.0.dev2"));
  EXPECT_LT(v("1.0.post1.dev9"), v("1.0.post1"));
}

TEST(Version, CanonicalFormDropsTrailingZerosAsPackagingDoes) {
  // packaging.utils.canonicalize_version, which Warehouse groups releases by.
  EXPECT_EQ(v("1.0").canonical_str(), "1");
  EXPECT_EQ(v("1.0.0").canonical_str(), "1");
  EXPECT_EQ(v("v1").canonical_str(), "1");
  EXPECT_EQ(v("0.0").canonical_str(), "0");
  EXPECT_EQ(v("1.0.1").canonical_str(), "1.0.1");
  EXPECT_EQ(v("1.10.0").canonical_str(), "1.10");
  EXPECT_EQ(v("2.0.0rc1").canonical_str(), "2rc1");
  EXPECT_EQ(v("1.0.0-1").canonical_str(), "1.post1");
  EXPECT_EQ(v("0!1.0.dev3").canonical_str(), "1.dev3");
  EXPECT_EQ(v("2!1.0").canonical_str(), "2!1");
  EXPECT_EQ(v("1.0.0+CU128_Torch2.8").canonical_str(), "1+cu128.torch2.8");
  EXPECT_EQ(v("2.8.0+cu128").canonical_str(), "2.8+cu128");
  // Numeric local segments compare as numbers.
  EXPECT_EQ(v("1.0+abc.01").canonical_str(), v("1+abc.1").canonical_str());
  // Equal versions have one canonical form, unequal ones different forms.
  for (const auto& [a, b] : {std::pair{"1.0", "1.0.0.0"}, std::pair{"1.0rc1", "1.0.0c1"},
                             std::pair{"1.0.post0", "1.0.0-0"}}) {
    EXPECT_EQ(v(a), v(b)) << a << " " << b;
    EXPECT_EQ(v(a).canonical_str(), v(b).canonical_str()) << a << " " << b;
  }
  EXPECT_NE(v("1.0+cu128torch2.8").canonical_str(), v("1.0+cu128.torch2.8").canonical_str());
  EXPECT_NE(v("1.0.post0").canonical_str(), v("1.0").canonical_str());
}

}  // namespace
}  // namespace wf::core
