#include "wheelforge/core/wheel_variant.hpp"

#include <gtest/gtest.h>

#include <string>

namespace wf::core {
namespace {

WheelVariant cuda_variant(std::string label, std::string bound) {
  WheelVariant v;
  v.label = std::move(label);
  v.schema = "https://variants-schema.wheelnext.dev/v0.0.3.json";
  v.priorities = R"({"namespace":["nvidia"]})";
  v.properties["nvidia"]["cuda_version_lower_bound"] = {std::move(bound)};
  return v;
}

TEST(WheelVariant, StoredFormRoundTrips) {
  WheelVariant v = cuda_variant("cu128", "12.8");
  v.properties["nvidia"]["sm_arch"] = {"100_real", "90_real"};
  v.providers = R"({"nvidia":{"requires":["nvidia-variant-provider>=0.1"]}})";
  const auto back = decode_variant(encode_variant(v));
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(*back, v);

  WheelVariant null;
  null.label = "null";
  null.schema = "https://variants-schema.wheelnext.dev/v0.1.0.json";
  null.priorities = R"({"namespace":[]})";
  const auto null_back = decode_variant(encode_variant(null));
  ASSERT_TRUE(null_back.has_value());
  EXPECT_EQ(*null_back, null);
}

TEST(WheelVariant, StoredFormRejectsForeignText) {
  EXPECT_FALSE(decode_variant("").has_value());
  EXPECT_FALSE(decode_variant("cu128\nx\ny\nz").has_value());
  EXPECT_FALSE(decode_variant("wfvariant1\ncu128\ns\np\n\nnvidia :: bad").has_value());
  EXPECT_FALSE(decode_variant("wfvariant1\ncu128\ns\np\n\nNV :: a :: b").has_value());
}

TEST(WheelVariant, DescribesProperties) {
  WheelVariant v = cuda_variant("cu128", "12.8");
  v.properties["x86_64"]["level"] = {"v3"};
  EXPECT_EQ(describe_properties(v.properties),
            "nvidia :: cuda_version_lower_bound :: 12.8, x86_64 :: level :: v3");
  EXPECT_EQ(describe_properties({}), "no properties");
}

TEST(WheelVariant, ReadsTheCudaLowerBound) {
  const auto cuda = variant_cuda(cuda_variant("cu128", "12.8").properties);
  ASSERT_TRUE(cuda.has_value());
  EXPECT_EQ(cuda->major, 12);
  EXPECT_EQ(cuda->minor, 8);
  EXPECT_EQ(cuda->property, "nvidia :: cuda_version_lower_bound :: 12.8");

  const auto major_only = variant_cuda(cuda_variant("cu13", "13").properties);
  ASSERT_TRUE(major_only.has_value());
  EXPECT_EQ(major_only->major, 13);
  EXPECT_FALSE(major_only->minor.has_value());

  VariantProperties several;
  several["nvidia"]["cuda_version_lower_bound"] = {"12.9", "12.6"};
  EXPECT_EQ(variant_cuda(several)->minor, 6);

  VariantProperties none;
  none["x86_64"]["level"] = {"v3"};
  EXPECT_FALSE(variant_cuda(none).has_value());
  VariantProperties junk;
  junk["nvidia"]["cuda_version_lower_bound"] = {"latest"};
  EXPECT_FALSE(variant_cuda(junk).has_value());
}

TEST(WheelVariant, PropertiesFillAndCheckTheHints) {
  // No backend in the label: the properties give it.
  auto filled = hints_with_variant(VariantHints{}, "", cuda_variant("cu128", "12.8"));
  ASSERT_TRUE(filled.ok());
  EXPECT_EQ(filled->backend, Backend::cuda);
  EXPECT_EQ(filled->cuda_major, 12);
  EXPECT_EQ(filled->cuda_minor, 8);

  // The label agrees: kept.
  auto agree = hints_with_variant(parse_local_label("cu128torch2.8"), "+cu128torch2.8",
                                  cuda_variant("cu128", "12.8"));
  ASSERT_TRUE(agree.ok());
  EXPECT_EQ(agree->torch, (TorchSeries{2, 8}));

  // Another minor, another major, a CPU label: refused, naming both.
  auto minor =
      hints_with_variant(parse_local_label("cu126"), "cu126", cuda_variant("cu128", "12.8"));
  ASSERT_FALSE(minor.ok());
  EXPECT_NE(minor.error().message.find("cuda_version_lower_bound :: 12.8"), std::string::npos);
  EXPECT_NE(minor.error().message.find("'+cu126'"), std::string::npos);
  EXPECT_FALSE(
      hints_with_variant(parse_local_label("cu130"), "cu130", cuda_variant("cu128", "12.8")).ok());
  auto cpu = hints_with_variant(parse_local_label("cpu"), "cpu", cuda_variant("cu128", "12.8"));
  ASSERT_FALSE(cpu.ok());
  EXPECT_NE(cpu.error().message.find("says cpu"), std::string::npos);

  // Properties without CUDA change nothing.
  WheelVariant cpu_level;
  cpu_level.label = "x8664v3";
  cpu_level.properties["x86_64"]["level"] = {"v3"};
  auto same = hints_with_variant(parse_local_label("cpu"), "cpu", cpu_level);
  ASSERT_TRUE(same.ok());
  EXPECT_EQ(*same, parse_local_label("cpu"));
}

TEST(WheelVariant, CudaPropertyAgainstTheLinkedRuntime) {
  WheelFindings findings;
  BinaryFindings b;
  b.path = "pkg/_ext.so";
  b.cuda_major = 13;
  b.cuda_library = "libcudart.so.13";
  findings.binaries.push_back(b);
  const auto st = check_variant_against_binaries(cuda_variant("cu128", "12.8"), findings);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message.find("libcudart.so.13"), std::string::npos);
  EXPECT_NE(st.error().message.find("cuda_version_lower_bound :: 12.8"), std::string::npos);
  EXPECT_TRUE(check_variant_against_binaries(cuda_variant("cu130", "13.0"), findings).ok());
  EXPECT_TRUE(check_variant_against_binaries(cuda_variant("cu128", "12.8"), WheelFindings{}).ok());
}

TEST(WheelVariant, ConflictsWithinARelease) {
  const WheelVariant a = cuda_variant("cu128", "12.8");
  EXPECT_FALSE(variant_conflict(a, a, "a.whl").has_value());
  // Another label with other properties: fine.
  EXPECT_FALSE(variant_conflict(cuda_variant("cu126", "12.6"), a, "a.whl").has_value());
  // The same label with other properties: refused, naming the label and both definitions.
  const auto clash = variant_conflict(cuda_variant("cu128", "12.6"), a, "a.whl");
  ASSERT_TRUE(clash.has_value());
  EXPECT_NE(clash->find("variant label 'cu128'"), std::string::npos);
  EXPECT_NE(clash->find("cuda_version_lower_bound :: 12.6"), std::string::npos);
  EXPECT_NE(clash->find("cuda_version_lower_bound :: 12.8"), std::string::npos);
  EXPECT_NE(clash->find("'a.whl'"), std::string::npos);
  // Another label of the incoming file's table that redefines an existing one.
  WheelVariant table = cuda_variant("cu126", "12.6");
  table.others["cu128"] = cuda_variant("x", "12.9").properties;
  EXPECT_TRUE(variant_conflict(table, a, "a.whl").has_value());
  // Other default priorities or schema: the release's variants.json could not hold both.
  WheelVariant prio = cuda_variant("cu126", "12.6");
  prio.priorities = R"({"namespace":["nvidia","x86_64"]})";
  const auto p = variant_conflict(prio, a, "a.whl");
  ASSERT_TRUE(p.has_value());
  EXPECT_NE(p->find("default-priorities"), std::string::npos);
  WheelVariant schema = cuda_variant("cu126", "12.6");
  schema.schema = "https://variants-schema.wheelnext.dev/v0.1.0.json";
  EXPECT_TRUE(variant_conflict(schema, a, "a.whl").has_value());
}

}  // namespace
}  // namespace wf::core
