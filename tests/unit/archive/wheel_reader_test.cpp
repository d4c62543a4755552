#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "archive/zip_builder.hpp"
#include "wheelforge/archive/reader.hpp"

namespace wf::archive {
namespace {

namespace fs = std::filesystem;
using fixtures::build_zip;
using fixtures::Compression;
using fixtures::ZipEntry;
using fixtures::ZipOptions;
using ::testing::HasSubstr;

constexpr std::string_view kDir = "demo_pkg-1.0+cu128.dist-info";
const std::string kMetadata =
    "Metadata-Version: 2.1\r\nName: demo-pkg\r\nVersion: 1.0+cu128\r\n\r\nD\xc3\xa9scription";
const std::string kWheel = "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: false\n";

std::string member(std::string_view dir, std::string_view file) {
  return std::string(dir) + "/" + std::string(file);
}

// A well-formed wheel of the project "demo-pkg" 1.0+cu128; METADATA is deflated.
std::vector<ZipEntry> wheel_entries(std::string_view dir = kDir) {
  return {
      {"demo_pkg/__init__.py", "x = 1\n"},
      {"demo_pkg/_C.so", std::string(3000, '\x7f'), Compression::deflate},
      {member(dir, "METADATA"), kMetadata, Compression::deflate},
      {member(dir, "WHEEL"), kWheel},
      {member(dir, "RECORD"), ""},
  };
}

ZipOptions zip64() {
  ZipOptions options;
  options.zip64 = true;
  return options;
}
ZipOptions with_trailer(std::string trailer) {
  ZipOptions options;
  options.trailer = std::move(trailer);
  return options;
}
// Data prepended to the zip; the offsets are those of the zip alone.
ZipOptions with_prefix(std::string prefix) {
  ZipOptions options;
  options.prefix = std::move(prefix);
  return options;
}
// Data prepended to the zip with offsets fixed up to match, as `zip -A` does.
ZipOptions with_adjusted_prefix(std::string prefix) {
  ZipOptions options = with_prefix(std::move(prefix));
  options.offsets_include_prefix = true;
  return options;
}
ZipOptions with_gap(std::string gap) {
  ZipOptions options;
  options.gap_before_central_directory = std::move(gap);
  return options;
}
Limits metadata_cap(std::uint64_t bytes) {
  Limits limits;
  limits.max_metadata_bytes = bytes;
  return limits;
}
Limits member_cap(std::uint64_t members) {
  Limits limits;
  limits.max_members = members;
  return limits;
}

class WheelReaderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("wf-archive-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  fs::path write(std::string_view bytes) {
    fs::path path = dir_ / "demo_pkg-1.0+cu128-cp312-cp312-linux_x86_64.whl";
    fixtures::write_file(path, bytes);
    return path;
  }
  Result<WheelContents> read(std::string_view bytes, const Limits& limits = {}) {
    return read_wheel(write(bytes), "demo-pkg", "1.0+cu128", limits);
  }
  // The error message of a read that must fail with Errc::invalid.
  std::string failure(std::string_view bytes, const Limits& limits = {}) {
    auto result = read(bytes, limits);
    if (result.ok()) return "(unexpectedly accepted)";
    EXPECT_EQ(result.error().code, Errc::invalid) << result.error().message;
    return result.error().message;
  }

  fs::path dir_;
};

TEST_F(WheelReaderTest, ReturnsMetadataAndWheelBytesExactly) {
  auto result = read(build_zip(wheel_entries()));
  ASSERT_TRUE(result) << result.error().message;
  EXPECT_EQ(result->metadata, kMetadata);
  EXPECT_EQ(result->wheel, kWheel);
  EXPECT_EQ(result->dist_info_dir, kDir);
}

TEST_F(WheelReaderTest, ComparesTheDistInfoNameNormalizedAndTheVersionIgnoringCase) {
  auto entries = wheel_entries("Demo.Pkg-1.0+CU128.dist-info");
  auto result = read_wheel(write(build_zip(entries)), "demo_pkg", "1.0+cu128", {});
  ASSERT_TRUE(result) << result.error().message;
  EXPECT_EQ(result->dist_info_dir, "Demo.Pkg-1.0+CU128.dist-info");

  entries = wheel_entries("demo_pkg-1.0_post1.dist-info");
  result = read_wheel(write(build_zip(entries)), "demo-pkg", "1.0-post1", {});
  ASSERT_TRUE(result) << result.error().message;
}

TEST_F(WheelReaderTest, FindsMetadataAtTheEndOfALargeArchive) {
  std::vector<ZipEntry> entries;
  entries.reserve(2010);
  for (int i = 0; i < 2000; ++i) {
    entries.emplace_back("demo_pkg/data/" + std::to_string(i) + ".bin",
                         std::string(4096, static_cast<char>(i)));
  }
  entries.emplace_back("demo_pkg/_big.so", std::string(16U << 20U, 'k'));
  for (auto& e : wheel_entries()) entries.push_back(std::move(e));
  auto result = read(build_zip(entries));
  ASSERT_TRUE(result) << result.error().message;
  EXPECT_EQ(result->metadata, kMetadata);
  EXPECT_EQ(result->wheel, kWheel);
}

TEST_F(WheelReaderTest, AcceptsDataDescriptors) {
  auto entries = wheel_entries();
  for (auto& e : entries) e.data_descriptor = true;
  auto result = read(build_zip(entries));
  ASSERT_TRUE(result) << result.error().message;
  EXPECT_EQ(result->metadata, kMetadata);

  result = read(build_zip(entries, zip64()));
  ASSERT_TRUE(result) << result.error().message;
  EXPECT_EQ(result->metadata, kMetadata);
}

TEST_F(WheelReaderTest, AcceptsZip64) {
  auto result = read(build_zip(wheel_entries(), zip64()));
  ASSERT_TRUE(result) << result.error().message;
  EXPECT_EQ(result->metadata, kMetadata);
  EXPECT_EQ(result->wheel, kWheel);
}

TEST_F(WheelReaderTest, RejectsFilesThatAreNotZips) {
  EXPECT_EQ(failure("Metadata-Version: 2.1\nName: demo-pkg\n"), "not a zip archive");
  EXPECT_EQ(failure(""), "not a zip archive");
  EXPECT_EQ(failure(fixtures::gzip(std::string(100000, 'z'))), "not a zip archive");
}

TEST_F(WheelReaderTest, FailsWithIoWhenTheFileCannotBeOpened) {
  auto result = read_wheel(dir_ / "missing.whl", "demo-pkg", "1.0+cu128");
  ASSERT_FALSE(result);
  EXPECT_EQ(result.error().code, Errc::io);
}

TEST_F(WheelReaderTest, RejectsDataOutsideTheMembers) {
  EXPECT_THAT(failure(build_zip(wheel_entries(), with_trailer("trailing garbage"))),
              HasSubstr("trailing data"));
  EXPECT_THAT(failure(build_zip(wheel_entries(), with_prefix("#!/bin/sh\nexit 0\n"))),
              HasSubstr("not where the end record says"));
  EXPECT_THAT(failure(build_zip(wheel_entries(), with_adjusted_prefix("#!/bin/sh\nexit 0\n"))),
              HasSubstr("17 bytes of data before the first member"));
  EXPECT_THAT(
      failure(build_zip(wheel_entries(), with_gap("hidden"))),
      HasSubstr("6 bytes of unexplained data after member 'demo_pkg-1.0+cu128.dist-info/RECORD'"));
}

TEST_F(WheelReaderTest, ReportsEveryBadMemberNameTogether) {
  auto entries = wheel_entries();
  entries.emplace_back("../evil.py", "x");
  entries.emplace_back("/etc/evil", "x");
  entries.emplace_back("demo_pkg\\evil.py", "x");
  entries.emplace_back("demo_pkg/evil\x01.py", "x");
  entries.emplace_back("demo_pkg/__init__.py", "y = 2\n");
  const std::string message = failure(build_zip(entries));
  EXPECT_THAT(message, HasSubstr("member name '../evil.py' contains a '..' component"));
  EXPECT_THAT(message, HasSubstr("member name '/etc/evil' is absolute"));
  EXPECT_THAT(message, HasSubstr("member name 'demo_pkg\\evil.py' contains a backslash"));
  EXPECT_THAT(message, HasSubstr("member name 'demo_pkg/evil?.py' contains a control character"));
  EXPECT_THAT(message, HasSubstr("duplicate member name 'demo_pkg/__init__.py'"));
}

TEST_F(WheelReaderTest, ReportsMissingMetadataAndWheel) {
  std::vector<ZipEntry> entries = {
      {"demo_pkg/__init__.py", ""},
      {member(kDir, "RECORD"), ""},
  };
  const std::string message = failure(build_zip(entries));
  EXPECT_THAT(message, HasSubstr("demo_pkg-1.0+cu128.dist-info/METADATA is missing"));
  EXPECT_THAT(message, HasSubstr("demo_pkg-1.0+cu128.dist-info/WHEEL is missing"));
}

TEST_F(WheelReaderTest, RequiresExactlyOneMatchingDistInfoDirectory) {
  EXPECT_EQ(failure(build_zip({{"demo_pkg/__init__.py", ""}})), "no .dist-info directory");
  // Nested .dist-info directories do not count.
  EXPECT_EQ(failure(build_zip(
                {{member("demo_pkg/demo_pkg-1.0+cu128.dist-info", "METADATA"), kMetadata}})),
            "no .dist-info directory");

  auto entries = wheel_entries();
  for (auto& e : wheel_entries("other-2.0.dist-info")) entries.push_back(std::move(e));
  entries.erase(entries.begin() + 5, entries.begin() + 7);  // the duplicated package files
  EXPECT_THAT(failure(build_zip(entries)),
              HasSubstr("several .dist-info directories: 'demo_pkg-1.0+cu128.dist-info', "
                        "'other-2.0.dist-info'"));

  EXPECT_EQ(failure(build_zip(wheel_entries("demo_pkg-1.1+cu128.dist-info"))),
            ".dist-info directory 'demo_pkg-1.1+cu128.dist-info' does not match the file name "
            "(expected 'demo_pkg-1.0+cu128.dist-info')");
  EXPECT_THAT(failure(build_zip(wheel_entries("demo_pkgs-1.0+cu128.dist-info"))),
              HasSubstr("does not match the file name"));
}

TEST_F(WheelReaderTest, StopsInflatingMetadataAtTheCap) {
  auto entries = wheel_entries();
  entries[2].data = std::string(5000, 'M');
  EXPECT_EQ(failure(build_zip(entries), metadata_cap(1000)),
            "demo_pkg-1.0+cu128.dist-info/METADATA inflates to more than 1000 bytes");

  // Declaring a small size does not get past the cap: inflation stops at the declared size.
  entries[2].data = std::string(2U << 20U, 'M');
  entries[2].uncompressed_size = 10;
  EXPECT_EQ(failure(build_zip(entries), metadata_cap(1000)),
            "demo_pkg-1.0+cu128.dist-info/METADATA cannot be read: it inflates to more than its "
            "declared size of 10 bytes");

  entries[3].data = std::string(2000, 'W');
  entries[2].data = kMetadata;
  entries[2].uncompressed_size.reset();
  EXPECT_EQ(failure(build_zip(entries), metadata_cap(1000)),
            "demo_pkg-1.0+cu128.dist-info/WHEEL inflates to more than 1000 bytes");
}

TEST_F(WheelReaderTest, ReportsDataErrorsOfMetadata) {
  auto entries = wheel_entries();
  entries[2].crc = 0x12345678U;
  EXPECT_THAT(failure(build_zip(entries)),
              HasSubstr("demo_pkg-1.0+cu128.dist-info/METADATA cannot be read: ZIP bad CRC"));

  entries = wheel_entries();
  entries[2].uncompressed_size = 10;
  EXPECT_THAT(failure(build_zip(entries)),
              HasSubstr("demo_pkg-1.0+cu128.dist-info/METADATA cannot be read"));
}

TEST_F(WheelReaderTest, LimitsTheNumberOfMembers) {
  EXPECT_EQ(failure(build_zip(wheel_entries()), member_cap(4)),
            "the archive has 5 members, more than the limit of 4 (max_archive_members)");
  EXPECT_TRUE(read(build_zip(wheel_entries()), member_cap(5)));
}

TEST_F(WheelReaderTest, RequiresRecord) {
  auto entries = wheel_entries();
  entries.pop_back();
  EXPECT_EQ(failure(build_zip(entries)), "demo_pkg-1.0+cu128.dist-info/RECORD is missing");
  // A RECORD elsewhere does not count.
  entries.emplace_back("demo_pkg/RECORD", "");
  EXPECT_EQ(failure(build_zip(entries)), "demo_pkg-1.0+cu128.dist-info/RECORD is missing");
}

TEST_F(WheelReaderTest, LimitsTheDeclaredInflatedSizeWithoutInflating) {
  auto entries = wheel_entries();
  // Sizes as the central directory declares them; the member's data is never inflated.
  entries[1].uncompressed_size = 3U << 20U;
  Limits total;
  total.max_inflated_bytes = 2U << 20U;
  const std::string zip = build_zip(entries);
  const std::string declared = std::to_string((3U << 20U) + 6 + kMetadata.size() + kWheel.size());
  EXPECT_EQ(failure(zip, total), "the wheel inflates to " + declared +
                                     " bytes, more than the limit of 2097152 bytes "
                                     "(max_inflated_size)");
  total.max_inflated_bytes = 4U << 20U;
  EXPECT_TRUE(read(zip, total));
}

TEST_F(WheelReaderTest, LimitsTheCompressionRatioAboveTheFloor) {
  auto entries = wheel_entries();
  entries[1].uncompressed_size = 20U << 20U;  // a few KiB that claim 20 MiB: a bomb
  const std::string zip = build_zip(entries);
  const std::string message = failure(zip);
  EXPECT_THAT(message, HasSubstr("the wheel inflates to "));
  EXPECT_THAT(message, HasSubstr(" times its size of " + std::to_string(zip.size()) +
                                 " bytes, more than the limit of 100 times "
                                 "(max_compression_ratio)"));

  // Under the floor, the ratio is not judged.
  entries[1].uncompressed_size = 10U << 20U;
  EXPECT_TRUE(read(build_zip(entries)));

  // At the limit exactly is accepted, one byte more is not.
  Limits ratio;
  ratio.ratio_floor_bytes = 0;
  ratio.max_compression_ratio = 3;
  entries[1].uncompressed_size = 0;
  const std::uint64_t others = 6 + kMetadata.size() + kWheel.size();
  const std::uint64_t size = build_zip(entries).size();  // sizes do not change the zip's size
  entries[1].uncompressed_size = 3 * size - others;
  EXPECT_TRUE(read(build_zip(entries), ratio));
  entries[1].uncompressed_size = 3 * size - others + 1;
  EXPECT_THAT(failure(build_zip(entries), ratio), HasSubstr("(max_compression_ratio)"));
}

TEST_F(WheelReaderTest, ReportsTheSizeLimitWithTheOtherProblems) {
  auto entries = wheel_entries();
  entries[1].uncompressed_size = 20U << 20U;
  entries.pop_back();  // RECORD
  entries.emplace_back("../evil.py", "x");
  const std::string message = failure(build_zip(entries));
  EXPECT_THAT(message, HasSubstr("(max_compression_ratio)"));
  EXPECT_THAT(message, HasSubstr("RECORD is missing"));
  EXPECT_THAT(message, HasSubstr("member name '../evil.py' contains a '..' component"));
}

TEST_F(WheelReaderTest, RejectsEncryptionAndUnsupportedCompression) {
  auto entries = wheel_entries();
  entries[0].flags = 1;
  entries[1].method = 12;  // bzip2
  const std::string message = failure(build_zip(entries));
  EXPECT_THAT(message, HasSubstr("member 'demo_pkg/__init__.py' is encrypted"));
  EXPECT_THAT(message, HasSubstr("member 'demo_pkg/_C.so' uses unsupported compression method 12"));
}

TEST_F(WheelReaderTest, RejectsLocalHeadersThatDisagreeWithTheCentralDirectory) {
  auto entries = wheel_entries();
  entries[0].local_name = "demo_pkg/__main__.py";
  EXPECT_THAT(failure(build_zip(entries)),
              HasSubstr("member 'demo_pkg/__init__.py' has a different name in its local header"));
}

TEST_F(WheelReaderTest, RejectsOverlappingMembers) {
  auto entries = wheel_entries();
  entries[0].compressed_size = 1000;
  EXPECT_THAT(failure(build_zip(entries)),
              HasSubstr("member 'demo_pkg/__init__.py' overlaps member 'demo_pkg/_C.so'"));
}

TEST_F(WheelReaderTest, RejectsMembersThatShareALocalHeader) {
  std::vector<ZipEntry> entries = wheel_entries();
  entries[1].name = "demo_pkg/x.py";
  entries[1].data = entries[0].data;
  entries[1].compression = Compression::stored;
  std::string zip = build_zip(entries);
  // Point the second central-directory entry at the first member's local header, as
  // overlapping-file zip bombs do.
  const std::size_t first = zip.find("PK\x01\x02");
  const std::size_t second = zip.find("PK\x01\x02", first + 4);
  ASSERT_NE(second, std::string::npos);
  zip.replace(second + 42, 4, std::string(4, '\0'));
  const std::string message = failure(zip);
  EXPECT_THAT(message,
              HasSubstr("member 'demo_pkg/x.py' has a different name in its local header"));
}

}  // namespace
}  // namespace wf::archive

namespace wf::archive {
namespace {

TEST_F(WheelReaderTest, ReadsVariantJsonWhereTheWheelHasOne) {
  auto plain = read(build_zip(wheel_entries()));
  ASSERT_TRUE(plain) << plain.error().message;
  EXPECT_FALSE(plain->variant_json.has_value());

  const std::string json = R"({"variants": {"cu128": {}}})";
  auto entries = wheel_entries();
  // Before METADATA and after it: found either way.
  entries.insert(entries.begin(),
                 ZipEntry{member(kDir, "variant.json"), json, Compression::deflate});
  auto first = read(build_zip(entries));
  ASSERT_TRUE(first) << first.error().message;
  EXPECT_EQ(first->variant_json, json);
  EXPECT_EQ(first->metadata, kMetadata);

  entries = wheel_entries();
  entries.push_back(ZipEntry{member(kDir, "variant.json"), json});
  auto last = read(build_zip(entries));
  ASSERT_TRUE(last) << last.error().message;
  EXPECT_EQ(last->variant_json, json);

  // A variant.json elsewhere is not the wheel's.
  entries = wheel_entries();
  entries.push_back(ZipEntry{"demo_pkg/variant.json", json});
  auto elsewhere = read(build_zip(entries));
  ASSERT_TRUE(elsewhere) << elsewhere.error().message;
  EXPECT_FALSE(elsewhere->variant_json.has_value());

  // Under the same cap as METADATA.
  entries = wheel_entries();
  entries.push_back(ZipEntry{member(kDir, "variant.json"), std::string(5000, ' ') + json});
  EXPECT_EQ(failure(build_zip(entries), metadata_cap(1000)),
            "demo_pkg-1.0+cu128.dist-info/variant.json inflates to more than 1000 bytes");
}

}  // namespace
}  // namespace wf::archive
