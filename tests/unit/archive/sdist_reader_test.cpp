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
using fixtures::build_tar;
using fixtures::gzip;
using fixtures::TarEntry;
using ::testing::HasSubstr;

const std::string kPkgInfo = "Metadata-Version: 2.1\nName: demo-pkg\nVersion: 1.0\n\nlong text\n";

std::vector<TarEntry> sdist_entries() {
  return {
      TarEntry::directory("demo_pkg-1.0/"),
      TarEntry::file("demo_pkg-1.0/PKG-INFO", kPkgInfo),
      TarEntry::file("demo_pkg-1.0/pyproject.toml", "[build-system]\n"),
      TarEntry::directory("demo_pkg-1.0/src/demo_pkg/"),
      TarEntry::file("demo_pkg-1.0/src/demo_pkg/__init__.py", std::string(70000, '#')),
      TarEntry::symlink("demo_pkg-1.0/src/demo_pkg/kernel.cu", "../../csrc/kernel.cu"),
      TarEntry::file("demo_pkg-1.0/csrc/kernel.cu", "__global__ void k() {}\n"),
      TarEntry::hardlink("demo_pkg-1.0/csrc/copy.cu", "demo_pkg-1.0/csrc/kernel.cu"),
  };
}

Limits limits(std::uint64_t metadata_bytes, std::uint64_t members, std::uint64_t inflated_bytes) {
  Limits l;
  l.max_metadata_bytes = metadata_bytes;
  l.max_members = members;
  l.max_inflated_bytes = inflated_bytes;
  return l;
}

class SdistReaderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("wf-archive-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  Result<std::string> read(std::string_view bytes, const Limits& limits = {}) {
    const fs::path path = dir_ / "demo_pkg-1.0.tar.gz";
    fixtures::write_file(path, bytes);
    return read_sdist_pkg_info(path, limits);
  }
  std::string failure(std::string_view bytes, const Limits& limits = {}) {
    auto result = read(bytes, limits);
    if (result.ok()) return "(unexpectedly accepted)";
    EXPECT_EQ(result.error().code, Errc::invalid) << result.error().message;
    return result.error().message;
  }

  fs::path dir_;
};

TEST_F(SdistReaderTest, ReturnsPkgInfoExactly) {
  auto result = read(gzip(build_tar(sdist_entries())));
  ASSERT_TRUE(result) << result.error().message;
  EXPECT_EQ(*result, kPkgInfo);
}

TEST_F(SdistReaderTest, RequiresPkgInfoInTheTopDirectory) {
  auto entries = sdist_entries();
  entries.erase(entries.begin() + 1);
  EXPECT_EQ(failure(gzip(build_tar(entries))), "no PKG-INFO in the top directory");

  entries.push_back(TarEntry::file("demo_pkg-1.0/src/PKG-INFO", kPkgInfo));
  EXPECT_EQ(failure(gzip(build_tar(entries))), "no PKG-INFO in the top directory");

  EXPECT_EQ(failure(gzip(build_tar({}))), "no PKG-INFO in the top directory");
}

TEST_F(SdistReaderTest, RejectsWhatIsNotAGzipCompressedTar) {
  const std::string tar = build_tar(sdist_entries());
  EXPECT_EQ(failure(tar), "not a gzip-compressed tar archive");
  EXPECT_EQ(failure(""), "not a gzip-compressed tar archive");
  EXPECT_EQ(failure("Metadata-Version: 2.1\n"), "not a gzip-compressed tar archive");
  EXPECT_EQ(failure(gzip(std::string(5000, 'x'))), "not a gzip-compressed tar archive");
}

TEST_F(SdistReaderTest, FailsWithIoWhenTheFileCannotBeOpened) {
  auto result = read_sdist_pkg_info(dir_ / "missing.tar.gz");
  ASSERT_FALSE(result);
  EXPECT_EQ(result.error().code, Errc::io);
}

TEST_F(SdistReaderTest, ReportsEveryMemberOutsideTheTopDirectoryTogether) {
  auto entries = sdist_entries();
  entries.push_back(TarEntry::file("other/setup.py", "import os\n"));
  entries.push_back(TarEntry::file("demo_pkg-1.0/../evil", "x"));
  entries.push_back(TarEntry::file("/etc/evil", "x"));
  entries.push_back(TarEntry::symlink("demo_pkg-1.0/up", "../.."));
  entries.push_back(TarEntry::symlink("demo_pkg-1.0/abs", "/etc/passwd"));
  entries.push_back(TarEntry::hardlink("demo_pkg-1.0/hard", "other/setup.py"));
  entries.push_back(TarEntry::file("demo_pkg-1.0/pyproject.toml", "again"));
  const std::string message = failure(gzip(build_tar(entries)));
  EXPECT_THAT(message,
              HasSubstr("member 'other/setup.py' is outside the top directory 'demo_pkg-1.0'"));
  EXPECT_THAT(message, HasSubstr("member name 'demo_pkg-1.0/../evil' contains a '..' component"));
  EXPECT_THAT(message, HasSubstr("member name '/etc/evil' is absolute"));
  EXPECT_THAT(message, HasSubstr("link 'demo_pkg-1.0/up' points outside the top directory"));
  EXPECT_THAT(message, HasSubstr("link 'demo_pkg-1.0/abs' points outside the top directory"));
  EXPECT_THAT(message, HasSubstr("link 'demo_pkg-1.0/hard' points outside the top directory"));
  EXPECT_THAT(message, HasSubstr("duplicate member name 'demo_pkg-1.0/pyproject.toml'"));
}

TEST_F(SdistReaderTest, AppliesTheLimits) {
  auto entries = sdist_entries();
  entries[1].data = std::string(5000, 'P');
  EXPECT_EQ(failure(gzip(build_tar(entries)), limits(1000, 200'000, 1U << 30U)),
            "demo_pkg-1.0/PKG-INFO inflates to more than 1000 bytes");
  EXPECT_EQ(failure(gzip(build_tar(sdist_entries())), limits(1U << 20U, 3, 1U << 30U)),
            "the archive has more than 3 members, the limit (max_archive_members)");
  EXPECT_EQ(failure(gzip(build_tar(sdist_entries())), limits(1U << 20U, 200'000, 50000)),
            "the sdist inflates to more than the limit of 50000 bytes (max_inflated_size)");
}

TEST_F(SdistReaderTest, LimitsTheCompressionRatioAboveTheFloor) {
  // The sizes the tar headers declare are what counts: the stream stops at the header that
  // passes the limit, before its data is inflated.
  auto entries = sdist_entries();
  entries.push_back(TarEntry::file("demo_pkg-1.0/bomb.bin", "small"));
  entries.back().declared_size = 20U << 20U;
  const std::string bomb = gzip(build_tar(entries));
  EXPECT_EQ(failure(bomb), "the sdist inflates to more than 100 times its size of " +
                               std::to_string(bomb.size()) +
                               " bytes, the limit (max_compression_ratio)");
  Limits generous;
  generous.max_compression_ratio = 1'000'000;
  EXPECT_THAT(failure(bomb, generous), HasSubstr("cannot read the sdist"));  // truncated data

  // Under the floor, the ratio is not judged (the file is still truncated).
  entries.back().declared_size = 1U << 20U;
  EXPECT_THAT(failure(gzip(build_tar(entries))), HasSubstr("cannot read the sdist"));
}

TEST_F(SdistReaderTest, RefusesDevicesFifosSocketsAndSparseFiles) {
  auto entries = sdist_entries();
  entries.push_back(TarEntry::special("demo_pkg-1.0/tty", TarEntry::Type::char_device));
  entries.push_back(TarEntry::special("demo_pkg-1.0/disk", TarEntry::Type::block_device));
  entries.push_back(TarEntry::special("demo_pkg-1.0/pipe", TarEntry::Type::fifo));
  entries.push_back(TarEntry::sparse("demo_pkg-1.0/holes.bin", "data", 1U << 20U));
  const std::string message = failure(gzip(build_tar(entries)));
  const char* kOnly = " (an sdist holds files, directories and links only)";
  EXPECT_THAT(message,
              HasSubstr(std::string("member 'demo_pkg-1.0/tty' is a character device") + kOnly));
  EXPECT_THAT(message,
              HasSubstr(std::string("member 'demo_pkg-1.0/disk' is a block device") + kOnly));
  EXPECT_THAT(message, HasSubstr(std::string("member 'demo_pkg-1.0/pipe' is a FIFO") + kOnly));
  EXPECT_THAT(message,
              HasSubstr(std::string("member 'demo_pkg-1.0/holes.bin' is a sparse file") + kOnly));

  // Each alone is refused too, and the same entries as plain files are fine.
  for (const auto type : {TarEntry::Type::char_device, TarEntry::Type::fifo}) {
    auto one = sdist_entries();
    one.push_back(TarEntry::special("demo_pkg-1.0/x", type));
    EXPECT_THAT(failure(gzip(build_tar(one))), HasSubstr("member 'demo_pkg-1.0/x' is a "));
  }
  auto plain = sdist_entries();
  plain.push_back(TarEntry::file("demo_pkg-1.0/holes.bin", "data"));
  EXPECT_TRUE(read(gzip(build_tar(plain))));
}

TEST_F(SdistReaderTest, RefusesAnSdistThatIsAlsoAZip) {
  const std::string sdist = gzip(build_tar(sdist_entries()));
  const std::string zip =
      fixtures::build_zip({{"demo_pkg/__init__.py", "import os\n"}, {"setup.py", "evil"}});
  // A zip appended to the gzip stream: gzip readers stop at the end of their member, zip
  // readers look at the end of the file.
  const std::string polyglot = sdist + zip;
  const std::string message = failure(polyglot);
  EXPECT_THAT(message,
              HasSubstr("the sdist is also a zip archive (a zip end-of-central-directory record "
                        "at offset " +
                        std::to_string(polyglot.size() - 22) + ")"));

  // An empty zip's end record is a zip too.
  EXPECT_THAT(failure(sdist + fixtures::build_zip({})), HasSubstr("is also a zip archive"));

  // The signature alone, as compressed data may hold it by chance, is not a zip.
  auto entries = sdist_entries();
  entries.push_back(TarEntry::file("demo_pkg-1.0/sig.bin",
                                   std::string("PK\x05\x06", 4) + std::string(40, '\x11')));
  const std::string with_signature = gzip(build_tar(entries));  // stored blocks: visible
  ASSERT_NE(with_signature.find(std::string("PK\x05\x06", 4)), std::string::npos);
  EXPECT_TRUE(read(with_signature));
}

TEST_F(SdistReaderTest, RejectsATruncatedStream) {
  auto entries = sdist_entries();
  entries[4].data = std::string(300000, '#');
  const std::string whole = gzip(build_tar(entries));
  EXPECT_THAT(failure(whole.substr(0, whole.size() / 2)), HasSubstr("cannot read the sdist: "));
  EXPECT_EQ(failure(whole.substr(0, 12)),
            "not a gzip-compressed tar archive (truncated gzip input)");
}

}  // namespace
}  // namespace wf::archive
