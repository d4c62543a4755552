// PEP 825 variant wheels in the catalog (migration 13): the stored variant, and the rule that a
// label means one set of properties within a release, checked in the write transaction.

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "backends.hpp"
#include "wheelforge/catalog/catalog.hpp"
#include "wheelforge/core/wheel_variant.hpp"

namespace wf::catalog {
namespace {

namespace fs = std::filesystem;

class VariantCatalogTestBase : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("wf-variant-catalog-" + std::to_string(::getpid()) + "-" + backends::test_dir_name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    auto location = backends::fresh_location(backend_);
    ASSERT_TRUE(location) << location.error().message;
    location_ = *location;
  }
  void TearDown() override { fs::remove_all(dir_); }

  static NewFile variant_wheel(const std::string& label, const std::string& bound, char sha,
                               const std::string& python = "cp312") {
    NewFile nf;
    nf.file.filename = "demo-1.0-" + python + "-" + python + "-linux_x86_64-" + label + ".whl";
    nf.file.project = "demo";
    nf.file.version = "1.0";
    nf.file.sha256 = std::string(64, sha);
    nf.file.size = 10;
    nf.file.upload_time = 1'700'000'000'000'000;
    nf.file.metadata_sha256 = std::string(64, 'm');
    nf.file.metadata_size = 5;
    nf.file.tags = core::WheelTags{std::nullopt, python, python, "linux_x86_64", label};
    core::WheelVariant v;
    v.label = label;
    v.schema = "https://variants-schema.wheelnext.dev/v0.0.3.json";
    v.priorities = R"({"namespace":["nvidia"]})";
    v.properties["nvidia"]["cuda_version_lower_bound"] = {bound};
    nf.file.variant = v;
    nf.display_name = "demo";
    return nf;
  }

  Result<std::unique_ptr<Catalog>> open_cat() { return open_catalog(location_, dir_); }

  backends::Backend backend_ = backends::Backend::sqlite;
  std::string location_;
  fs::path dir_;
};

class VariantCatalogTest : public VariantCatalogTestBase,
                           public ::testing::WithParamInterface<backends::Backend> {
 protected:
  void SetUp() override {
    backend_ = GetParam();
    VariantCatalogTestBase::SetUp();
  }
};

INSTANTIATE_TEST_SUITE_P(Backends, VariantCatalogTest,
                         ::testing::Values(backends::Backend::sqlite,
                                           backends::Backend::postgresql),
                         backends::BackendName());

/// Tests of SQLite internals (older schemas).
using SqliteVariantCatalogTest = VariantCatalogTestBase;

TEST_P(VariantCatalogTest, StoresTheVariantWithTheFile) {
  auto cat = open_cat();
  ASSERT_TRUE(cat) << cat.error().message;
  const NewFile nf = variant_wheel("cu128", "12.8", 'a');
  auto r = (*cat)->insert_file(nf);
  ASSERT_TRUE(r) << r.error().message;
  ASSERT_EQ(r->first, InsertOutcome::inserted);

  NewFile plain = variant_wheel("x", "1", 'b');
  plain.file.filename = "demo-1.0-py3-none-any.whl";
  plain.file.tags = core::WheelTags{std::nullopt, "py3", "none", "any", std::nullopt};
  plain.file.variant.reset();
  ASSERT_EQ((*cat)->insert_file(plain)->first, InsertOutcome::inserted);

  auto contents = (*cat)->load();
  ASSERT_TRUE(contents);
  ASSERT_EQ(contents->files.size(), 2U);
  for (const auto& f : contents->files) {
    if (f.filename == nf.file.filename) {
      ASSERT_TRUE(f.variant.has_value());
      EXPECT_EQ(*f.variant, *nf.file.variant);
      EXPECT_EQ(f.tags.variant_label, "cu128");
    } else {
      EXPECT_FALSE(f.variant.has_value());
      EXPECT_FALSE(f.tags.variant_label.has_value());
    }
  }
}

TEST_P(VariantCatalogTest, RefusesALabelDefinedDifferentlyInTheRelease) {
  auto cat = open_cat();
  ASSERT_TRUE(cat) << cat.error().message;
  ASSERT_EQ((*cat)->insert_file(variant_wheel("cu128", "12.8", 'a'))->first,
            InsertOutcome::inserted);
  // The same label, other tags, the same properties: fine.
  ASSERT_EQ((*cat)->insert_file(variant_wheel("cu128", "12.8", 'b', "cp311"))->first,
            InsertOutcome::inserted);
  // Another label: fine.
  ASSERT_EQ((*cat)->insert_file(variant_wheel("cu126", "12.6", 'c'))->first,
            InsertOutcome::inserted);
  // The same label with other properties: refused, the row returned is the file it contradicts.
  const auto before = (*cat)->generation();
  auto clash = (*cat)->insert_file(variant_wheel("cu128", "12.6", 'd', "cp310"));
  ASSERT_TRUE(clash) << clash.error().message;
  EXPECT_EQ(clash->first, InsertOutcome::variant_conflict);
  EXPECT_EQ(clash->second.tags.variant_label, "cu128");
  EXPECT_EQ((*cat)->generation().value(), before.value());
  EXPECT_EQ((*cat)->load()->files.size(), 3U);
  // Another release may define the label otherwise.
  NewFile other = variant_wheel("cu128", "12.6", 'e', "cp310");
  other.file.version = "2.0";
  other.file.filename = "demo-2.0-cp310-cp310-linux_x86_64-cu128.whl";
  EXPECT_EQ((*cat)->insert_file(other)->first, InsertOutcome::inserted);
}

TEST_P(VariantCatalogTest, PrecheckAnswersAsTheInsertWouldAndStoresNothing) {
  auto cat = open_cat();
  ASSERT_TRUE(cat) << cat.error().message;
  const NewFile stored = variant_wheel("cu128", "12.8", 'a');
  ASSERT_EQ((*cat)->insert_file(stored)->first, InsertOutcome::inserted);
  const auto before = (*cat)->generation();

  auto fresh = (*cat)->precheck(variant_wheel("cu128", "12.8", 'b', "cp311"));
  ASSERT_TRUE(fresh) << fresh.error().message;
  EXPECT_FALSE(fresh->has_value());
  auto clash = (*cat)->precheck(variant_wheel("cu128", "12.6", 'c', "cp310"));
  ASSERT_TRUE(clash) << clash.error().message;
  ASSERT_TRUE(clash->has_value());
  EXPECT_EQ((*clash)->first, InsertOutcome::variant_conflict);
  EXPECT_EQ((*clash)->second.filename, stored.file.filename);
  auto same = (*cat)->precheck(stored);
  ASSERT_TRUE(same && same->has_value());
  EXPECT_EQ((*same)->first, InsertOutcome::identical);
  auto taken = (*cat)->precheck(variant_wheel("cu128", "12.8", 'd'));
  ASSERT_TRUE(taken && taken->has_value());
  EXPECT_EQ((*taken)->first, InsertOutcome::conflict);

  EXPECT_EQ((*cat)->generation().value(), before.value());
  EXPECT_EQ((*cat)->load()->files.size(), 1U);
}

}  // namespace
}  // namespace wf::catalog
