#include "wheelforge/render/variants.hpp"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace wf::render {
namespace {

using Json = nlohmann::json;

// PyTorch's published variant wheels use schema 0.0.3 with providers.
constexpr const char* kTorchStyle = R"({
  "$schema": "https://variants-schema.wheelnext.dev/v0.0.3.json",
  "default-priorities": {"namespace": ["nvidia"], "feature": {"nvidia": ["cuda_version_lower_bound"]}},
  "providers": {"nvidia": {"requires": ["nvidia-variant-provider>=0.0.1,<1.0.0"],
                           "plugin-api": "nvidia_variant_provider.plugin:NvidiaVariantPlugin"}},
  "variants": {"cu128": {"nvidia": {"cuda_version_lower_bound": ["12.8"], "sm_arch": ["90_real", "100_real"]}}}
})";

// The PEP 825 form (0.1.x): no providers.
constexpr const char* kPep825 = R"({
  "$schema": "https://variants-schema.wheelnext.dev/v0.1.0.json",
  "default-priorities": {"namespace": ["x86_64", "blas_lapack"],
                         "property": {"blas_lapack": {"library": ["mkl", "openblas"]}}},
  "variants": {
    "x8664v3_openblas": {"blas_lapack": {"library": ["openblas"]}, "x86_64": {"level": ["v3"]}},
    "x8664v4_mkl": {"blas_lapack": {"library": ["mkl"]}, "x86_64": {"level": ["v4"]}}
  }
})";

TEST(VariantJson, KnowsTheSchemaVersions) {
  EXPECT_TRUE(is_known_variant_schema("https://variants-schema.wheelnext.dev/v0.0.3.json"));
  EXPECT_TRUE(is_known_variant_schema("https://variants-schema.wheelnext.dev/v0.1.0.json"));
  EXPECT_TRUE(is_known_variant_schema("https://variants-schema.wheelnext.dev/v0.1.12.json"));
  EXPECT_FALSE(is_known_variant_schema("https://variants-schema.wheelnext.dev/v0.0.2.json"));
  EXPECT_FALSE(is_known_variant_schema("https://variants-schema.wheelnext.dev/v0.2.0.json"));
  EXPECT_FALSE(is_known_variant_schema("https://variants-schema.wheelnext.dev/v1.0.0.json"));
  EXPECT_FALSE(is_known_variant_schema("https://variants-schema.wheelnext.dev/"));
  EXPECT_FALSE(is_known_variant_schema("https://example.com/v0.1.0.json"));
  EXPECT_FALSE(is_known_variant_schema("https://variants-schema.wheelnext.dev/v0.1.x.json"));
}

TEST(VariantJson, ReadsTheTorchStyle) {
  auto v = parse_variant_json(kTorchStyle, "cu128");
  ASSERT_TRUE(v.ok()) << v.error().message;
  EXPECT_EQ(v->label, "cu128");
  EXPECT_EQ(v->schema, "https://variants-schema.wheelnext.dev/v0.0.3.json");
  EXPECT_EQ(v->properties.at("nvidia").at("cuda_version_lower_bound"),
            (std::vector<std::string>{"12.8"}));
  // Values are a set: sorted.
  EXPECT_EQ(v->properties.at("nvidia").at("sm_arch"),
            (std::vector<std::string>{"100_real", "90_real"}));
  EXPECT_TRUE(v->others.empty());
  EXPECT_EQ(Json::parse(v->providers)["nvidia"]["plugin-api"],
            "nvidia_variant_provider.plugin:NvidiaVariantPlugin");
  EXPECT_EQ(Json::parse(v->priorities)["namespace"], Json::array({"nvidia"}));
}

TEST(VariantJson, ReadsThePep825FormAndItsOtherLabels) {
  auto v = parse_variant_json(kPep825, "x8664v4_mkl");
  ASSERT_TRUE(v.ok()) << v.error().message;
  EXPECT_TRUE(v->providers.empty());
  EXPECT_EQ(v->properties.at("x86_64").at("level"), (std::vector<std::string>{"v4"}));
  ASSERT_EQ(v->others.size(), 1U);
  EXPECT_EQ(v->others.at("x8664v3_openblas").at("blas_lapack").at("library"),
            (std::vector<std::string>{"openblas"}));
}

TEST(VariantJson, CanonicalFormIgnoresSpacingAndKeyOrder) {
  const char* reordered = R"({"variants":{"cu128":{"nvidia":{"sm_arch":["100_real","90_real"],
    "cuda_version_lower_bound":["12.8"]}}},
    "providers":{"nvidia":{"plugin-api":"nvidia_variant_provider.plugin:NvidiaVariantPlugin",
    "requires":["nvidia-variant-provider>=0.0.1,<1.0.0"]}},
    "default-priorities":{"feature":{"nvidia":["cuda_version_lower_bound"]},"namespace":["nvidia"]},
    "$schema":"https://variants-schema.wheelnext.dev/v0.0.3.json"})";
  auto a = parse_variant_json(kTorchStyle, "cu128");
  auto b = parse_variant_json(reordered, "cu128");
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(*a, *b);
}

struct Bad {
  std::string json;
  std::string label;
  std::vector<std::string> expected;
};

TEST(VariantJson, RefusesMalformedFilesNamingTheProblem) {
  const std::string schema = R"("$schema":"https://variants-schema.wheelnext.dev/v0.0.3.json")";
  const std::string prio = R"("default-priorities":{"namespace":["nvidia"]})";
  const std::vector<Bad> cases = {
      {"", "cu128", {"not valid JSON"}},
      {"{\"variants\":", "cu128", {"not valid JSON"}},
      {"[1,2]", "cu128", {"not a JSON object"}},
      {"{" + prio + R"(,"variants":{"cu128":{"nvidia":{"a":["1"]}}}})",
       "cu128",
       {"'$schema' is missing"}},
      {R"({"$schema":"https://variants-schema.wheelnext.dev/v9.9.9.json",)" + prio +
           R"(,"variants":{"cu128":{"nvidia":{"a":["1"]}}}})",
       "cu128",
       {"v9.9.9", "does not read"}},
      {"{" + schema + R"(,"variants":{"cu128":{"nvidia":{"a":["1"]}}}})",
       "cu128",
       {"'default-priorities' is missing"}},
      {"{" + schema +
           R"(,"default-priorities":{"feature":{}},"variants":{"cu128":{"nvidia":{"a":["1"]}}}})",
       "cu128",
       {"'default-priorities.namespace' is missing"}},
      {"{" + schema +
           R"(,"default-priorities":{"namespace":"nvidia"},"variants":{"cu128":{"nvidia":{"a":["1"]}}}})",
       "cu128",
       {"is not a list"}},
      {"{" + schema + "," + prio +
           R"(,"providers":[],"variants":{"cu128":{"nvidia":{"a":["1"]}}}})",
       "cu128",
       {"'providers' is not an object"}},
      {"{" + schema + "," + prio + "}", "cu128", {"'variants' is missing"}},
      {"{" + schema + "," + prio + R"(,"variants":{}})",
       "cu128",
       {"'variants' is missing or not a non-empty"}},
      {"{" + schema + "," + prio + R"(,"variants":{"cu126":{"nvidia":{"a":["1"]}}}})",
       "cu128",
       {"does not define 'cu128'"}},
      {"{" + schema + "," + prio + R"(,"variants":{"CU128":{"nvidia":{"a":["1"]}}}})",
       "cu128",
       {"variant label 'CU128' is not valid"}},
      {"{" + schema + "," + prio + R"(,"variants":{"cu128":{"NVIDIA":{"a":["1"]}}}})",
       "cu128",
       {"namespace 'NVIDIA' is not valid"}},
      {"{" + schema + "," + prio + R"(,"variants":{"cu128":{"nvidia":{"a-b":["1"]}}}})",
       "cu128",
       {"feature name 'a-b' is not valid"}},
      {"{" + schema + "," + prio + R"(,"variants":{"cu128":{"nvidia":{"a":[">=12"]}}}})",
       "cu128",
       {"not a valid value"}},
      {"{" + schema + "," + prio + R"(,"variants":{"cu128":{"nvidia":{"a":[]}}}})",
       "cu128",
       {"not a non-empty list of values"}},
      {"{" + schema + "," + prio + R"(,"variants":{"cu128":{"nvidia":{"a":"12.8"}}}})",
       "cu128",
       {"not a non-empty list of values"}},
      {"{" + schema + "," + prio + R"(,"variants":{"cu128":{"amd":{"a":["1"]}}}})",
       "cu128",
       {"namespace 'amd'", "not listed in 'default-priorities.namespace'"}},
      {"{" + schema + "," + prio + R"(,"variants":{"null":{"nvidia":{"a":["1"]}}}})",
       "null",
       {"'null' is reserved"}},
      {"{" + schema + "," + prio + R"(,"variants":{"cu128":{"nvidia":{"a":["1"]}}}})",
       "cu'128",
       {"the variant label 'cu'128' of the file name is not valid"}},
      {"{" + schema + "," + prio + R"(,"variants":{"cu128":{}}})",
       "cu128",
       {"has no properties: only 'null' may be empty"}},
  };
  for (const auto& c : cases) {
    auto v = parse_variant_json(c.json, c.label);
    ASSERT_FALSE(v.ok()) << c.json;
    EXPECT_EQ(v.error().code, Errc::invalid);
    for (const auto& e : c.expected) {
      EXPECT_NE(v.error().message.find(e), std::string::npos)
          << "json: " << c.json << "\nmessage: " << v.error().message << "\nexpected: " << e;
    }
    for (const char ch : v.error().message) {
      EXPECT_TRUE(static_cast<unsigned char>(ch) >= 0x20 && static_cast<unsigned char>(ch) < 0x7F);
    }
  }
}

TEST(VariantJson, AcceptsTheNullVariant) {
  auto v = parse_variant_json(R"({"$schema":"https://variants-schema.wheelnext.dev/v0.1.0.json",
    "default-priorities":{"namespace":[]},"variants":{"null":{}}})",
                              "null");
  ASSERT_TRUE(v.ok()) << v.error().message;
  EXPECT_TRUE(v->properties.empty());
}

TEST(VariantsJson, RendersTheReleaseDocument) {
  auto a = parse_variant_json(kTorchStyle, "cu128");
  ASSERT_TRUE(a.ok());
  core::WheelVariant b = *a;
  b.label = "cu126";
  b.properties["nvidia"]["cuda_version_lower_bound"] = {"12.6"};
  const std::vector<core::WheelVariant> variants = {*a, b};
  const std::string text = render_variants_json(variants);
  const Json doc = Json::parse(text);
  EXPECT_EQ(doc["$schema"], "https://variants-schema.wheelnext.dev/v0.0.3.json");
  EXPECT_EQ(doc["default-priorities"]["namespace"], Json::array({"nvidia"}));
  EXPECT_EQ(doc["providers"]["nvidia"]["requires"][0], "nvidia-variant-provider>=0.0.1,<1.0.0");
  ASSERT_EQ(doc["variants"].size(), 2U);
  EXPECT_EQ(doc["variants"]["cu126"]["nvidia"]["cuda_version_lower_bound"], Json::array({"12.6"}));
  EXPECT_EQ(doc["variants"]["cu128"]["nvidia"]["sm_arch"], Json::array({"100_real", "90_real"}));
  // The order of the wheels does not matter.
  const std::vector<core::WheelVariant> reversed = {b, *a};
  EXPECT_EQ(render_variants_json(reversed), text);
  // What it writes reads back as a variant.json of each label.
  auto again = parse_variant_json(text, "cu126");
  ASSERT_TRUE(again.ok()) << again.error().message;
  EXPECT_EQ(again->properties, b.properties);

  // Without providers, none are written; the null variant is an empty object.
  auto n = parse_variant_json(R"({"$schema":"https://variants-schema.wheelnext.dev/v0.1.0.json",
    "default-priorities":{"namespace":[]},"variants":{"null":{}}})",
                              "null");
  ASSERT_TRUE(n.ok());
  const std::vector<core::WheelVariant> only_null = {*n};
  const Json nd = Json::parse(render_variants_json(only_null));
  EXPECT_FALSE(nd.contains("providers"));
  EXPECT_TRUE(nd["variants"]["null"].is_object());
  EXPECT_TRUE(nd["variants"]["null"].empty());
}

}  // namespace
}  // namespace wf::render
