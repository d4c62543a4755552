#include "wheelforge/archive/retag.hpp"

#include <archive.h>
#include <archive_entry.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "archive/shell.hpp"
#include "archive/zip_builder.hpp"
#include "wheelforge/archive/reader.hpp"
#include "wheelforge/crypto/digest.hpp"
#include "wheelforge/util/strings.hpp"

namespace wf::archive {
namespace {

namespace fs = std::filesystem;
using fixtures::build_zip;
using fixtures::Compression;
using fixtures::quote;
using fixtures::shell;
using fixtures::ZipEntry;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr std::string_view kSystemPython = "/usr/bin/python3";
constexpr std::string_view kPipPython = "/root/.pyenv/versions/3.11.7/bin/python";

std::string metadata_for(std::string_view version) {
  return "Metadata-Version: 2.1\r\nName: demo-pkg\r\nVersion: " + std::string(version) +
         "\r\nSummary: a demo\r\nRequires-Dist: torch==2.8.*\r\n\r\nD\xc3\xa9scription\r\n"
         "Version: 9.9 (in the description, not a header)\r\n";
}

const std::string kWheelFile =
    "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: false\nTag: cp311-cp311-linux_x86_64\n";

struct Member {
  std::string name;
  std::string data;
  unsigned perm = 0;
  bool directory = false;
};

struct ArchiveReadFree {
  void operator()(struct ::archive* a) const { archive_read_free(a); }
};

// Every member of a zip, read with libarchive independently of the code under test. Member
// names must be ASCII (libarchive cannot spell others in the C locale).
std::vector<Member> read_members(const fs::path& path) {
  std::vector<Member> out;
  std::unique_ptr<struct ::archive, ArchiveReadFree> a(archive_read_new());
  archive_read_support_format_zip_seekable(a.get());
  if (archive_read_open_filename(a.get(), path.c_str(), 10240) != ARCHIVE_OK) {
    ADD_FAILURE() << "cannot open " << path << ": " << archive_error_string(a.get());
    return out;
  }
  struct archive_entry* entry = nullptr;
  while (archive_read_next_header(a.get(), &entry) == ARCHIVE_OK) {
    Member m;
    m.name = archive_entry_pathname(entry);
    m.perm = archive_entry_perm(entry);
    m.directory = archive_entry_filetype(entry) == AE_IFDIR;
    char buffer[8192];
    la_ssize_t n = 0;
    while ((n = archive_read_data(a.get(), buffer, sizeof buffer)) > 0) {
      m.data.append(buffer, static_cast<std::size_t>(n));
    }
    EXPECT_GE(n, 0) << "data error in " << m.name;
    out.push_back(std::move(m));
  }
  return out;
}

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::vector<std::string> names(const std::vector<Member>& members) {
  std::vector<std::string> out;
  out.reserve(members.size());
  for (const auto& m : members) out.push_back(m.name);
  return out;
}

const Member* find(const std::vector<Member>& members, std::string_view name) {
  for (const auto& m : members) {
    if (m.name == name) return &m;
  }
  return nullptr;
}

// RECORD's CSV: fields may be quoted, with quotes doubled inside.
std::vector<std::vector<std::string>> parse_csv(std::string_view text) {
  std::vector<std::vector<std::string>> rows;
  std::vector<std::string> row;
  std::string field;
  bool quoted = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (quoted) {
      if (c == '"' && i + 1 < text.size() && text[i + 1] == '"') {
        field += '"';
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        field += c;
      }
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      row.push_back(std::move(field));
      field.clear();
    } else if (c == '\n') {
      row.push_back(std::move(field));
      field.clear();
      rows.push_back(std::move(row));
      row.clear();
    } else if (c != '\r') {
      field += c;
    }
  }
  return rows;
}

// Checks that RECORD is the last member and lists every other file exactly once with its
// sha256 and size, and itself without either.
void verify_record(const std::vector<Member>& members, std::string_view dist_info) {
  ASSERT_FALSE(members.empty());
  const Member& record = members.back();
  ASSERT_EQ(record.name, std::string(dist_info) + "/RECORD");
  std::map<std::string, std::pair<std::string, std::string>> listed;
  for (const auto& row : parse_csv(record.data)) {
    ASSERT_EQ(row.size(), 3U) << record.data;
    EXPECT_TRUE(listed.emplace(row[0], std::pair{row[1], row[2]}).second) << "twice: " << row[0];
  }
  std::size_t files = 0;
  for (const auto& m : members) {
    if (m.directory) {
      EXPECT_EQ(listed.count(m.name), 0U) << m.name;
      continue;
    }
    ++files;
    const auto it = listed.find(m.name);
    ASSERT_NE(it, listed.end()) << m.name << " is not in RECORD";
    if (&m == &record) {
      EXPECT_EQ(it->second, (std::pair<std::string, std::string>{"", ""}));
      continue;
    }
    EXPECT_EQ(it->second.first, "sha256=" + base64url_nopad_encode(crypto::sha256_raw(m.data)))
        << m.name;
    EXPECT_EQ(it->second.second, std::to_string(m.data.size())) << m.name;
  }
  EXPECT_EQ(listed.size(), files);
}

class RetagTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("wf-retag-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "in");
    out_ = dir_ / "out";
  }
  void TearDown() override {
    if (!HasFailure()) fs::remove_all(dir_);
  }

  fs::path write(std::string_view filename, const std::vector<ZipEntry>& entries) {
    fs::path path = dir_ / "in" / filename;
    fixtures::write_file(path, build_zip(entries));
    return path;
  }

  // demo_pkg {version} for cp311 on linux_x86_64, with a package, a compiled extension, a
  // license in .dist-info and a (stale) RECORD.
  fs::path demo_wheel(std::string_view version, std::string_view dist_info_version = {}) {
    const std::string dir = "demo_pkg-" +
                            std::string(dist_info_version.empty() ? version : dist_info_version) +
                            ".dist-info";
    return write("demo_pkg-" + std::string(version) + "-cp311-cp311-linux_x86_64.whl",
                 {
                     {"demo_pkg/__init__.py", "from ._C import f\n"},
                     {"demo_pkg/_C.so", std::string(3000, '\x7f'), Compression::deflate},
                     {dir + "/LICENSE", "BSD\n"},
                     {dir + "/METADATA", metadata_for(version), Compression::deflate},
                     {dir + "/WHEEL", kWheelFile},
                     {dir + "/RECORD", "stale,,\n"},
                 });
  }

  // Skips (returns false) when the tool is missing; fails the test when it rejects the wheel.
  static bool python_has(std::string_view python, std::string_view module) {
    if (!fs::exists(python)) return false;
    return shell(std::string(python) + " -c 'import " + std::string(module) + "'").first == 0;
  }

  void expect_wheel_unpacks(const fs::path& wheel) {
    const fs::path dest = dir_ / ("unpacked-" + wheel.filename().string());
    const auto [status, output] = shell(std::string(kSystemPython) + " -m wheel unpack -d " +
                                        quote(dest) + " " + quote(wheel));
    EXPECT_EQ(status, 0) << output;
  }

  // Installs the wheel twice into fresh targets: as a file, and found by name and version in
  // its directory as pip finds wheels on an index; only the second runs pip's check that the
  // metadata matches the file name.
  static std::pair<int, std::string> pip_install(const fs::path& target, const std::string& what) {
    return shell("env -u PIP_FIND_LINKS PIP_CONFIG_FILE=/dev/null " + std::string(kPipPython) +
                 " -m pip install --no-index --no-deps --no-cache-dir --disable-pip-version-check"
                 " --target " +
                 quote(target) + " " + what);
  }

  void expect_pip_installs(const fs::path& wheel, std::string_view requirement,
                           std::string_view dist_info) {
    const fs::path as_file = dir_ / ("file-" + wheel.filename().string());
    auto [status, output] = pip_install(as_file, quote(wheel));
    EXPECT_EQ(status, 0) << output;
    EXPECT_TRUE(fs::is_directory(as_file / dist_info)) << output;

    const fs::path by_name = dir_ / ("name-" + wheel.filename().string());
    std::tie(status, output) = pip_install(by_name, "--find-links " + quote(wheel.parent_path()) +
                                                        " '" + std::string(requirement) + "'");
    EXPECT_EQ(status, 0) << output;
    EXPECT_TRUE(fs::is_directory(by_name / dist_info)) << output;
  }

  fs::path dir_;
  fs::path out_;
};

TEST_F(RetagTest, AddsALabel) {
  const fs::path in = demo_wheel("1.0");
  auto result = retag_wheel(in, "cu128torch2.8", out_);
  ASSERT_TRUE(result) << result.error().message;
  EXPECT_EQ(*result, out_ / "demo_pkg-1.0+cu128torch2.8-cp311-cp311-linux_x86_64.whl");
  EXPECT_TRUE(fs::exists(in));
  EXPECT_EQ(std::distance(fs::directory_iterator(out_), fs::directory_iterator()), 1);

  const std::string dist_info = "demo_pkg-1.0+cu128torch2.8.dist-info";
  const auto members = read_members(*result);
  EXPECT_THAT(names(members),
              ElementsAre("demo_pkg/__init__.py", "demo_pkg/_C.so", dist_info + "/LICENSE",
                          dist_info + "/METADATA", dist_info + "/WHEEL", dist_info + "/RECORD"));
  EXPECT_EQ(find(members, dist_info + "/METADATA")->data, metadata_for("1.0+cu128torch2.8"));
  EXPECT_EQ(find(members, dist_info + "/WHEEL")->data, kWheelFile);
  EXPECT_EQ(find(members, dist_info + "/LICENSE")->data, "BSD\n");
  EXPECT_EQ(find(members, "demo_pkg/_C.so")->data, std::string(3000, '\x7f'));
  EXPECT_EQ(find(members, "demo_pkg/_C.so")->perm, 0644U);
  verify_record(members, dist_info);

  auto read = read_wheel(*result, "demo_pkg", "1.0+cu128torch2.8");
  ASSERT_TRUE(read) << read.error().message;
  EXPECT_EQ(read->dist_info_dir, dist_info);
  EXPECT_EQ(read->metadata, metadata_for("1.0+cu128torch2.8"));
}

TEST_F(RetagTest, ReplacesAnExistingLabel) {
  const fs::path in = demo_wheel("2.8.3+cu126torch2.8");
  auto result = retag_wheel(in, "cu128torch2.8", out_);
  ASSERT_TRUE(result) << result.error().message;
  EXPECT_EQ(result->filename(), "demo_pkg-2.8.3+cu128torch2.8-cp311-cp311-linux_x86_64.whl");
  const std::string dist_info = "demo_pkg-2.8.3+cu128torch2.8.dist-info";
  const auto members = read_members(*result);
  EXPECT_EQ(find(members, dist_info + "/METADATA")->data, metadata_for("2.8.3+cu128torch2.8"));
  for (const auto& m : members) EXPECT_THAT(m.name, ::testing::Not(HasSubstr("cu126")));
  verify_record(members, dist_info);
  EXPECT_TRUE(read_wheel(*result, "demo-pkg", "2.8.3+cu128torch2.8"));
}

TEST_F(RetagTest, NormalizesTheLabelAndTheVersion) {
  // A non-normalized version in the file name and the .dist-info (as old tools wrote them).
  const fs::path in = demo_wheel("1.0_RC1");
  auto result = retag_wheel(in, "+CU128_Torch2-8", out_);
  ASSERT_TRUE(result) << result.error().message;
  EXPECT_EQ(result->filename(), "demo_pkg-1.0rc1+cu128.torch2.8-cp311-cp311-linux_x86_64.whl");
  const auto members = read_members(*result);
  EXPECT_NE(find(members, "demo_pkg-1.0rc1+cu128.torch2.8.dist-info/METADATA"), nullptr);
  verify_record(members, "demo_pkg-1.0rc1+cu128.torch2.8.dist-info");
}

TEST_F(RetagTest, NormalizesTheProjectName) {
  const fs::path in =
      write("Demo.Pkg-1.0-py3-none-any.whl",
            {
                {"demo_pkg/__init__.py", ""},
                {"Demo.Pkg-1.0.dist-info/METADATA",
                 "Metadata-Version: 2.1\nName: Demo.Pkg\nVersion: 1.0\n"},
                {"Demo.Pkg-1.0.dist-info/WHEEL", "Wheel-Version: 1.0\nTag: py3-none-any\n"},
                {"Demo.Pkg-1.0.dist-info/RECORD", ""},
            });
  auto result = retag_wheel(in, "cpu", out_);
  ASSERT_TRUE(result) << result.error().message;
  EXPECT_EQ(result->filename(), "demo_pkg-1.0+cpu-py3-none-any.whl");
  const auto members = read_members(*result);
  EXPECT_THAT(names(members),
              ElementsAre("demo_pkg/__init__.py", "demo_pkg-1.0+cpu.dist-info/METADATA",
                          "demo_pkg-1.0+cpu.dist-info/WHEEL", "demo_pkg-1.0+cpu.dist-info/RECORD"));
  EXPECT_EQ(members[1].data, "Metadata-Version: 2.1\nName: Demo.Pkg\nVersion: 1.0+cpu\n");
  verify_record(members, "demo_pkg-1.0+cpu.dist-info");
}

TEST_F(RetagTest, RenamesTheDataDirectoryAndKeepsTheBuildTag) {
  const std::string old = "demo_pkg-1.0+cu126torch2.8";
  std::vector<ZipEntry> entries = {
      {old + ".dist-info/METADATA",
       "Metadata-Version: 2.1\nName: demo_pkg\nVersion: 1.0+cu126torch2.8\n"},
      {"demo_pkg/", ""},
      {"demo_pkg/__init__.py", "x = 1\n"},
      {old + ".data/scripts/demo-tool", "#!python\nprint('hi')\n"},
      {old + ".data/data/share/demo/readme.txt", std::string(200000, 'r'), Compression::deflate},
      {old + ".dist-info/WHEEL",
       "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nBuild: 2\nTag: py3-none-any\n"},
      {old + ".dist-info/RECORD", ""},
      {old + ".dist-info/RECORD.jws", "{}"},
  };
  const fs::path in = write(old + "-2-py3-none-any.whl", entries);
  auto result = retag_wheel(in, "cu128torch2.8", out_);
  ASSERT_TRUE(result) << result.error().message;
  EXPECT_EQ(result->filename(), "demo_pkg-1.0+cu128torch2.8-2-py3-none-any.whl");
  const std::string stem = "demo_pkg-1.0+cu128torch2.8";
  const auto members = read_members(*result);
  EXPECT_THAT(names(members),
              ElementsAre("demo_pkg/", "demo_pkg/__init__.py", stem + ".data/scripts/demo-tool",
                          stem + ".data/data/share/demo/readme.txt", stem + ".dist-info/METADATA",
                          stem + ".dist-info/WHEEL", stem + ".dist-info/RECORD"));
  EXPECT_EQ(find(members, stem + ".data/data/share/demo/readme.txt")->data,
            std::string(200000, 'r'));
  verify_record(members, stem + ".dist-info");
  EXPECT_TRUE(read_wheel(*result, "demo_pkg", "1.0+cu128torch2.8"));
}

TEST_F(RetagTest, StreamsLargeMembers) {
  std::string big;
  big.reserve(3U << 20U);
  for (std::uint32_t i = 0; big.size() < (3U << 20U); ++i) {
    big += std::to_string(i * 2654435761U);
  }
  const fs::path in = write("demo_pkg-1.0-cp311-cp311-linux_x86_64.whl",
                            {
                                {"demo_pkg/_C.so", big, Compression::deflate},
                                {"demo_pkg/_D.so", big},
                                {"demo_pkg-1.0.dist-info/METADATA", metadata_for("1.0")},
                                {"demo_pkg-1.0.dist-info/WHEEL", kWheelFile},
                                {"demo_pkg-1.0.dist-info/RECORD", ""},
                            });
  auto result = retag_wheel(in, "cu130torch2.11", out_);
  ASSERT_TRUE(result) << result.error().message;
  const auto members = read_members(*result);
  EXPECT_EQ(find(members, "demo_pkg/_C.so")->data, big);
  EXPECT_EQ(find(members, "demo_pkg/_D.so")->data, big);
  // Deflated: the output is smaller than the two copies of the payload.
  EXPECT_LT(fs::file_size(*result), big.size());
  verify_record(members, "demo_pkg-1.0+cu130torch2.11.dist-info");
}

TEST_F(RetagTest, RewritesWheelTagsThatDisagreeWithTheFileName) {
  const std::string crlf_wheel =
      "Wheel-Version: 1.0\r\nGenerator: test\r\nTag: py3-none-any\r\nRoot-Is-Purelib: false\r\n";
  const fs::path in = write("demo_pkg-1.0-cp311.cp312-abi3-manylinux_2_28_x86_64.whl",
                            {
                                {"demo_pkg-1.0.dist-info/METADATA", metadata_for("1.0")},
                                {"demo_pkg-1.0.dist-info/WHEEL", crlf_wheel},
                                {"demo_pkg-1.0.dist-info/RECORD", ""},
                            });
  auto result = retag_wheel(in, "cu128", out_);
  ASSERT_TRUE(result) << result.error().message;
  const auto members = read_members(*result);
  EXPECT_EQ(find(members, "demo_pkg-1.0+cu128.dist-info/WHEEL")->data,
            "Wheel-Version: 1.0\r\nGenerator: test\r\nTag: cp311-abi3-manylinux_2_28_x86_64\r\n"
            "Tag: cp312-abi3-manylinux_2_28_x86_64\r\nRoot-Is-Purelib: false\r\n");
}

TEST_F(RetagTest, KeepsWheelTagsInAnyOrderWhenTheyAgree) {
  const std::string wheel =
      "Wheel-Version: 1.0\nTag: cp312-abi3-linux_x86_64\nTag: cp311-abi3-linux_x86_64\n";
  const fs::path in = write("demo_pkg-1.0-cp311.cp312-abi3-linux_x86_64.whl",
                            {
                                {"demo_pkg-1.0.dist-info/METADATA", metadata_for("1.0")},
                                {"demo_pkg-1.0.dist-info/WHEEL", wheel},
                                {"demo_pkg-1.0.dist-info/RECORD", ""},
                            });
  auto result = retag_wheel(in, "cu128", out_);
  ASSERT_TRUE(result) << result.error().message;
  EXPECT_EQ(find(read_members(*result), "demo_pkg-1.0+cu128.dist-info/WHEEL")->data, wheel);
}

TEST_F(RetagTest, AddsWheelTagsWhenThereAreNone) {
  const fs::path in = write("demo_pkg-1.0-py3-none-any.whl",
                            {
                                {"demo_pkg-1.0.dist-info/METADATA", metadata_for("1.0")},
                                {"demo_pkg-1.0.dist-info/WHEEL", "Wheel-Version: 1.0"},
                                {"demo_pkg-1.0.dist-info/RECORD", ""},
                            });
  auto result = retag_wheel(in, "cpu", out_);
  ASSERT_TRUE(result) << result.error().message;
  EXPECT_EQ(find(read_members(*result), "demo_pkg-1.0+cpu.dist-info/WHEEL")->data,
            "Wheel-Version: 1.0\nTag: py3-none-any\n");
}

TEST_F(RetagTest, QuotesRecordPathsThatNeedIt) {
  const fs::path in =
      write("demo_pkg-1.0-py3-none-any.whl",
            {
                {"demo_pkg/a,b \"c\".txt", "odd name"},
                {"demo_pkg-1.0.dist-info/METADATA", metadata_for("1.0")},
                {"demo_pkg-1.0.dist-info/WHEEL", "Wheel-Version: 1.0\nTag: py3-none-any\n"},
                {"demo_pkg-1.0.dist-info/RECORD", ""},
            });
  auto result = retag_wheel(in, "cpu", out_);
  ASSERT_TRUE(result) << result.error().message;
  const auto members = read_members(*result);
  EXPECT_THAT(members.back().data, HasSubstr("\"demo_pkg/a,b \"\"c\"\".txt\",sha256="));
  verify_record(members, "demo_pkg-1.0+cpu.dist-info");
}

TEST_F(RetagTest, RetaggingIntoTheSameDirectoryReplacesTheFile) {
  const fs::path in = demo_wheel("1.0+cu128torch2.8");
  auto result = retag_wheel(in, "cu128torch2.8", in.parent_path());
  ASSERT_TRUE(result) << result.error().message;
  EXPECT_EQ(*result, in);
  verify_record(read_members(in), "demo_pkg-1.0+cu128torch2.8.dist-info");
  auto again = retag_wheel(in, "cu128torch2.8", in.parent_path());
  ASSERT_TRUE(again) << again.error().message;
  EXPECT_EQ(std::distance(fs::directory_iterator(in.parent_path()), fs::directory_iterator()), 1);
}

TEST_F(RetagTest, OutputDependsOnlyOnTheInput) {
  const fs::path in = demo_wheel("1.0");
  auto a = retag_wheel(in, "cu128torch2.8", dir_ / "a");
  auto b = retag_wheel(in, "cu128torch2.8", dir_ / "b");
  ASSERT_TRUE(a && b);
  std::ifstream fa(*a, std::ios::binary);
  std::ifstream fb(*b, std::ios::binary);
  std::stringstream sa;
  std::stringstream sb;
  sa << fa.rdbuf();
  sb << fb.rdbuf();
  EXPECT_EQ(sa.str(), sb.str());
}

// ---------------------------------------------------------------------------------------------
// Build tags and platform tags (rewrite_wheel)

TEST_F(RetagTest, SetsABuildTag) {
  const fs::path in = demo_wheel("1.0+cu128torch2.8");
  WheelChanges changes;
  changes.build_tag = "1";
  auto result = rewrite_wheel(in, changes, out_);
  ASSERT_TRUE(result) << result.error().message;
  EXPECT_EQ(result->filename(), "demo_pkg-1.0+cu128torch2.8-1-cp311-cp311-linux_x86_64.whl");
  const std::string dist_info = "demo_pkg-1.0+cu128torch2.8.dist-info";
  const auto members = read_members(*result);
  // The version does not change: METADATA keeps every byte.
  EXPECT_EQ(find(members, dist_info + "/METADATA")->data, metadata_for("1.0+cu128torch2.8"));
  EXPECT_EQ(find(members, dist_info + "/WHEEL")->data, kWheelFile + "Build: 1\n");
  verify_record(members, dist_info);
  EXPECT_TRUE(read_wheel(*result, "demo_pkg", "1.0+cu128torch2.8"));
}

TEST_F(RetagTest, ReplacesABuildTag) {
  const std::string stem = "demo_pkg-1.0";
  const fs::path in =
      write(stem + "-2-py3-none-any.whl",
            {{stem + ".dist-info/METADATA", metadata_for("1.0")},
             {stem + ".dist-info/WHEEL",
              "Wheel-Version: 1.0\r\nBuild: 2\r\nTag: py3-none-any\r\nBuild: 2\r\n"},
             {stem + ".dist-info/RECORD", ""}});
  WheelChanges changes;
  changes.build_tag = "3a";
  auto result = rewrite_wheel(in, changes, out_);
  ASSERT_TRUE(result) << result.error().message;
  EXPECT_EQ(result->filename(), "demo_pkg-1.0-3a-py3-none-any.whl");
  EXPECT_EQ(find(read_members(*result), stem + ".dist-info/WHEEL")->data,
            "Wheel-Version: 1.0\r\nBuild: 3a\r\nTag: py3-none-any\r\n");

  // A WHEEL without Tag lines gets the Build line before the end of its headers.
  const fs::path bare =
      write("demo_pkg-1.0-py3-none-any.whl", {{stem + ".dist-info/METADATA", metadata_for("1.0")},
                                              {stem + ".dist-info/WHEEL", "Wheel-Version: 1.0"},
                                              {stem + ".dist-info/RECORD", ""}});
  changes.build_tag = "7";
  result = rewrite_wheel(bare, changes, dir_ / "bare");
  ASSERT_TRUE(result) << result.error().message;
  EXPECT_EQ(find(read_members(*result), stem + ".dist-info/WHEEL")->data,
            "Wheel-Version: 1.0\nTag: py3-none-any\nBuild: 7\n");
}

TEST_F(RetagTest, ReplacesThePlatformTags) {
  const fs::path in = demo_wheel("1.0");
  WheelChanges changes;
  changes.platform_tags = std::vector<std::string>{"manylinux_2_28_x86_64"};
  auto result = rewrite_wheel(in, changes, out_);
  ASSERT_TRUE(result) << result.error().message;
  EXPECT_EQ(result->filename(), "demo_pkg-1.0-cp311-cp311-manylinux_2_28_x86_64.whl");
  auto members = read_members(*result);
  EXPECT_EQ(find(members, "demo_pkg-1.0.dist-info/WHEEL")->data,
            "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: false\n"
            "Tag: cp311-cp311-manylinux_2_28_x86_64\n");
  EXPECT_EQ(find(members, "demo_pkg-1.0.dist-info/METADATA")->data, metadata_for("1.0"));
  verify_record(members, "demo_pkg-1.0.dist-info");

  // manylinux_2_17 with its legacy alias, as the manylinux assessment gives them.
  changes.platform_tags = std::vector<std::string>{"manylinux_2_17_x86_64", "manylinux2014_x86_64"};
  result = rewrite_wheel(in, changes, dir_ / "alias");
  ASSERT_TRUE(result) << result.error().message;
  EXPECT_EQ(result->filename(),
            "demo_pkg-1.0-cp311-cp311-manylinux_2_17_x86_64.manylinux2014_x86_64.whl");
  members = read_members(*result);
  EXPECT_EQ(find(members, "demo_pkg-1.0.dist-info/WHEEL")->data,
            "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: false\n"
            "Tag: cp311-cp311-manylinux_2_17_x86_64\nTag: cp311-cp311-manylinux2014_x86_64\n");
}

TEST_F(RetagTest, LabelBuildTagAndPlatformTagsTogether) {
  const fs::path in = demo_wheel("2.8.3+cu126torch2.8");
  WheelChanges changes;
  changes.local_label = "cu128torch2.8";
  changes.build_tag = "2";
  changes.platform_tags = std::vector<std::string>{"manylinux_2_34_x86_64"};
  auto result = rewrite_wheel(in, changes, out_);
  ASSERT_TRUE(result) << result.error().message;
  EXPECT_EQ(result->filename(),
            "demo_pkg-2.8.3+cu128torch2.8-2-cp311-cp311-manylinux_2_34_x86_64.whl");
  const std::string dist_info = "demo_pkg-2.8.3+cu128torch2.8.dist-info";
  const auto members = read_members(*result);
  EXPECT_EQ(find(members, dist_info + "/METADATA")->data, metadata_for("2.8.3+cu128torch2.8"));
  EXPECT_EQ(find(members, dist_info + "/WHEEL")->data,
            "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: false\n"
            "Tag: cp311-cp311-manylinux_2_34_x86_64\nBuild: 2\n");
  verify_record(members, dist_info);
  EXPECT_TRUE(read_wheel(*result, "demo_pkg", "2.8.3+cu128torch2.8"));
}

TEST_F(RetagTest, NoChangesGiveANormalizedCopy) {
  const fs::path in = demo_wheel("1.0_RC1");
  auto result = rewrite_wheel(in, WheelChanges{}, out_);
  ASSERT_TRUE(result) << result.error().message;
  EXPECT_EQ(result->filename(), "demo_pkg-1.0rc1-cp311-cp311-linux_x86_64.whl");
  const auto members = read_members(*result);
  EXPECT_EQ(find(members, "demo_pkg-1.0rc1.dist-info/WHEEL")->data, kWheelFile);
  EXPECT_EQ(find(members, "demo_pkg-1.0rc1.dist-info/METADATA")->data, metadata_for("1.0_RC1"));
  verify_record(members, "demo_pkg-1.0rc1.dist-info");
}

// ---------------------------------------------------------------------------------------------
// Content digests (what a rebuild compares)

TEST_F(RetagTest, ContentDigestIgnoresTheBuildTagAndZipMetadata) {
  const fs::path in = demo_wheel("1.0+cu128torch2.8");
  auto original = wheel_content_digest(in);
  ASSERT_TRUE(original) << original.error().message;
  EXPECT_EQ(original->size(), 64U);
  // The rewrite changes the member order, the compression, RECORD and WHEEL's Build line: the
  // contents stay the same.
  WheelChanges changes;
  changes.build_tag = "3";
  auto tagged = rewrite_wheel(in, changes, out_);
  ASSERT_TRUE(tagged) << tagged.error().message;
  auto tagged_digest = wheel_content_digest(*tagged);
  ASSERT_TRUE(tagged_digest) << tagged_digest.error().message;
  EXPECT_EQ(*tagged_digest, *original);
  changes.build_tag = "4";
  auto retagged = rewrite_wheel(*tagged, changes, dir_ / "again");
  ASSERT_TRUE(retagged) << retagged.error().message;
  EXPECT_EQ(wheel_content_digest(*retagged).value(), *original);
  // The file name does not count: the store keeps files under their sha256.
  const fs::path blob = dir_ / "blob";
  fs::copy_file(*tagged, blob);
  EXPECT_EQ(wheel_content_digest(blob).value(), *original);
}

TEST_F(RetagTest, ContentDigestSeesEveryOtherChange) {
  const std::string dir = "demo_pkg-1.0.dist-info";
  const auto wheel = [&](std::string_view name, std::string so, std::string wheel_file,
                         std::string extra = {}) {
    std::vector<ZipEntry> entries = {
        {"demo_pkg/__init__.py", "from ._C import f\n"},
        {"demo_pkg/_C.so", std::move(so), Compression::deflate},
        {dir + "/METADATA", metadata_for("1.0")},
        {dir + "/WHEEL", std::move(wheel_file)},
        {dir + "/RECORD", "whatever,,\n"},
    };
    if (!extra.empty()) entries.emplace_back("demo_pkg/extra.py", extra);
    return write(std::string(name) + "/demo_pkg-1.0-cp311-cp311-linux_x86_64.whl", entries);
  };
  fs::create_directories(dir_ / "in" / "a");
  fs::create_directories(dir_ / "in" / "b");
  fs::create_directories(dir_ / "in" / "c");
  fs::create_directories(dir_ / "in" / "d");
  fs::create_directories(dir_ / "in" / "e");
  const std::string so(3000, '\x7f');
  const auto base = wheel_content_digest(wheel("a", so, kWheelFile)).value();
  // Another RECORD and a Build line: the same contents.
  EXPECT_EQ(wheel_content_digest(wheel("b", so, kWheelFile + "Build: 1\n")).value(), base);
  // One byte of the binary, another WHEEL header, an added file: other contents.
  std::string other = so;
  other[1500] = 'x';
  EXPECT_NE(wheel_content_digest(wheel("c", other, kWheelFile)).value(), base);
  EXPECT_NE(wheel_content_digest(wheel("d", so, kWheelFile + "Root-Is-Purelib: true\n")).value(),
            base);
  EXPECT_NE(wheel_content_digest(wheel("e", so, kWheelFile, "x = 1\n")).value(), base);
}

TEST_F(RetagTest, ContentDigestRefusesDamagedWheels) {
  std::vector<ZipEntry> entries = {{"demo_pkg/_C.so", std::string(3000, 'a'), Compression::deflate},
                                   {"demo_pkg-1.0.dist-info/METADATA", metadata_for("1.0")}};
  entries[0].crc = 1234;
  const fs::path damaged = write("demo_pkg-1.0-py3-none-any.whl", entries);
  auto digest = wheel_content_digest(damaged);
  ASSERT_FALSE(digest);
  EXPECT_EQ(digest.error().code, Errc::invalid);
  EXPECT_THAT(digest.error().message, HasSubstr("demo_pkg/_C.so"));
  EXPECT_EQ(wheel_content_digest(dir_ / "missing.whl").error().code, Errc::io);
}

TEST_F(RetagTest, RejectsBadBuildAndPlatformTags) {
  const fs::path in = demo_wheel("1.0");
  for (const char* build : {"", "a1", "1-2", "1 2", "1/2", "+1"}) {
    WheelChanges changes;
    changes.build_tag = build;
    auto result = rewrite_wheel(in, changes, out_);
    ASSERT_FALSE(result) << build;
    EXPECT_EQ(result.error().code, Errc::invalid);
    EXPECT_THAT(result.error().message, HasSubstr("build tag")) << build;
  }
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{}, "the platform tag set is empty"},
      {{""}, "platform tag '' is not valid"},
      {{"many-linux"}, "platform tag 'many-linux' is not valid"},
      {{"manylinux_2_17_x86_64.manylinux2014_x86_64"}, "is not valid"},
      {{"linux_x86_64", "linux_x86_64"}, "platform tag 'linux_x86_64' is given twice"},
  };
  for (const auto& [tags, message] : cases) {
    WheelChanges changes;
    changes.platform_tags = tags;
    auto result = rewrite_wheel(in, changes, out_);
    ASSERT_FALSE(result) << message;
    EXPECT_EQ(result.error().code, Errc::invalid);
    EXPECT_THAT(result.error().message, HasSubstr(message));
  }
  // All problems at once.
  WheelChanges all;
  all.local_label = "cu 128";
  all.build_tag = "x";
  all.platform_tags = std::vector<std::string>{"a b"};
  const std::string message = rewrite_wheel(in, all, out_).error().message;
  EXPECT_THAT(message, HasSubstr("local version label"));
  EXPECT_THAT(message, HasSubstr("build tag 'x'"));
  EXPECT_THAT(message, HasSubstr("platform tag 'a b'"));
  EXPECT_FALSE(fs::exists(out_));
}

TEST_F(RetagTest, RejectsANameTooLongForAFileName) {
  WheelChanges changes;
  changes.platform_tags = std::vector<std::string>{std::string(250, 'x')};
  auto result = rewrite_wheel(demo_wheel("1.0"), changes, out_);
  ASSERT_FALSE(result);
  EXPECT_EQ(result.error().code, Errc::invalid);
  EXPECT_THAT(result.error().message, HasSubstr("the new file name"));
}

// ---------------------------------------------------------------------------------------------
// Rejections

TEST_F(RetagTest, RejectsBadLabels) {
  const fs::path in = demo_wheel("1.0");
  for (const char* label : {"", "+", "cu128..torch", ".cu128", "cu128.", "cu128 torch2.8",
                            "cu128/torch", "cu128+torch", "ç"}) {
    auto result = retag_wheel(in, label, out_);
    ASSERT_FALSE(result) << label;
    EXPECT_EQ(result.error().code, Errc::invalid);
    EXPECT_THAT(result.error().message, HasSubstr("local version label")) << label;
  }
  EXPECT_FALSE(fs::exists(out_));
}

TEST_F(RetagTest, RejectsFilesThatAreNotWheels) {
  const fs::path sdist = dir_ / "in" / "demo_pkg-1.0.tar.gz";
  fixtures::write_file(sdist, "x");
  EXPECT_THAT(retag_wheel(sdist, "cpu", out_).error().message, HasSubstr("is not a wheel"));

  const fs::path junk = dir_ / "in" / "demo_pkg-1.0-py3-none-any.whl";
  fixtures::write_file(junk, "Metadata-Version: 2.1\n");
  auto result = retag_wheel(junk, "cpu", out_);
  ASSERT_FALSE(result);
  EXPECT_EQ(result.error().code, Errc::invalid);
  EXPECT_THAT(result.error().message, HasSubstr("not a zip archive"));

  EXPECT_EQ(retag_wheel(dir_ / "in" / "missing-1.0-py3-none-any.whl", "cpu", out_).error().code,
            Errc::io);
}

TEST_F(RetagTest, RejectsWhatReadWheelRejects) {
  const fs::path no_dist_info = write("demo_pkg-1.0-py3-none-any.whl", {{"demo_pkg/x.py", ""}});
  EXPECT_THAT(retag_wheel(no_dist_info, "cpu", out_).error().message,
              HasSubstr("no .dist-info directory"));

  const fs::path wrong =
      write("demo_pkg-1.0-py3-none-any.whl", {{"other-1.0.dist-info/METADATA", metadata_for("1.0")},
                                              {"other-1.0.dist-info/WHEEL", kWheelFile},
                                              {"other-1.0.dist-info/RECORD", ""},
                                              {"../evil", ""}});
  const std::string message = retag_wheel(wrong, "cpu", out_).error().message;
  EXPECT_THAT(message, HasSubstr("does not match the file name"));
  EXPECT_THAT(message, HasSubstr("'../evil' contains a '..' component"));
  EXPECT_FALSE(fs::exists(out_));
}

TEST_F(RetagTest, RejectsMetadataThatContradictsTheFileName) {
  const fs::path in = write(
      "demo_pkg-1.0-py3-none-any.whl",
      {{"demo_pkg-1.0.dist-info/METADATA", "Metadata-Version: 2.1\nName: other\nVersion: 1.1\n"},
       {"demo_pkg-1.0.dist-info/WHEEL", "Wheel-Version: 2.0\n"},
       {"demo_pkg-1.0.dist-info/RECORD", ""}});
  auto result = retag_wheel(in, "cpu", out_);
  ASSERT_FALSE(result);
  EXPECT_EQ(result.error().code, Errc::invalid);
  EXPECT_THAT(result.error().message, HasSubstr("METADATA names the project 'other'"));
  EXPECT_THAT(result.error().message, HasSubstr("METADATA Version '1.1' contradicts"));
  EXPECT_THAT(result.error().message, HasSubstr("WHEEL"));
  EXPECT_FALSE(fs::exists(out_));
}

TEST_F(RetagTest, RejectsMetadataWithoutASingleVersionHeader) {
  for (const char* metadata :
       {"Metadata-Version: 2.1\nName: demo-pkg\nVersion: 1.0\nversion: 1.0\n",
        "Metadata-Version: 2.1\nName: demo-pkg\n\nVersion: 1.0\n"}) {
    const fs::path in =
        write("demo_pkg-1.0-py3-none-any.whl", {{"demo_pkg-1.0.dist-info/METADATA", metadata},
                                                {"demo_pkg-1.0.dist-info/WHEEL", kWheelFile},
                                                {"demo_pkg-1.0.dist-info/RECORD", ""}});
    auto result = retag_wheel(in, "cpu", out_);
    ASSERT_FALSE(result) << metadata;
    EXPECT_EQ(result.error().code, Errc::invalid);
    EXPECT_THAT(result.error().message, HasSubstr("Version")) << metadata;
  }
}

TEST_F(RetagTest, RewritesAFoldedVersionHeader) {
  const fs::path in =
      write("demo_pkg-1.0-py3-none-any.whl",
            {{"demo_pkg-1.0.dist-info/METADATA",
              "Metadata-Version: 2.1\nName: demo-pkg\nversion:\t1.0\n  \nSummary: s\n"},
             {"demo_pkg-1.0.dist-info/WHEEL", kWheelFile},
             {"demo_pkg-1.0.dist-info/RECORD", ""}});
  auto result = retag_wheel(in, "cpu", out_);
  ASSERT_TRUE(result) << result.error().message;
  EXPECT_EQ(find(read_members(*result), "demo_pkg-1.0+cpu.dist-info/METADATA")->data,
            "Metadata-Version: 2.1\nName: demo-pkg\nversion:\t1.0+cpu\nSummary: s\n");
}

TEST_F(RetagTest, RejectsMembersThatWouldCollide) {
  const fs::path in =
      write("demo_pkg-1.0-py3-none-any.whl",
            {{"demo_pkg-1.0.data/purelib/x.py", ""},
             {"demo_pkg-1.0+cpu.data/purelib/x.py", ""},
             {"demo_pkg-1.0.dist-info/METADATA", metadata_for("1.0")},
             {"demo_pkg-1.0.dist-info/WHEEL", "Wheel-Version: 1.0\nTag: py3-none-any\n"},
             {"demo_pkg-1.0.dist-info/RECORD", ""}});
  auto result = retag_wheel(in, "cpu", out_);
  ASSERT_FALSE(result);
  EXPECT_THAT(result.error().message, HasSubstr("two members would be named"));
  // The half-written temp file is gone.
  EXPECT_EQ(std::distance(fs::directory_iterator(out_), fs::directory_iterator()), 0);
}

TEST_F(RetagTest, RejectsMemberNamesThatAreNotUtf8) {
  const fs::path in = write("demo_pkg-1.0-py3-none-any.whl",
                            {{"demo_pkg/caf\xe9.txt", "latin-1 name"},
                             {"demo_pkg-1.0.dist-info/METADATA", metadata_for("1.0")},
                             {"demo_pkg-1.0.dist-info/WHEEL", kWheelFile},
                             {"demo_pkg-1.0.dist-info/RECORD", ""}});
  auto result = retag_wheel(in, "cpu", out_);
  ASSERT_FALSE(result);
  EXPECT_EQ(result.error().code, Errc::invalid);
  EXPECT_THAT(result.error().message, HasSubstr("member name 'demo_pkg/caf?.txt' is not UTF-8"));
}

TEST_F(RetagTest, RejectsDamagedMemberData) {
  ZipEntry bad("demo_pkg/_C.so", std::string(5000, 'x'), Compression::deflate);
  bad.crc = 0x12345678U;
  const fs::path in = write("demo_pkg-1.0-py3-none-any.whl",
                            {bad,
                             {"demo_pkg-1.0.dist-info/METADATA", metadata_for("1.0")},
                             {"demo_pkg-1.0.dist-info/WHEEL", kWheelFile},
                             {"demo_pkg-1.0.dist-info/RECORD", ""}});
  auto result = retag_wheel(in, "cpu", out_);
  ASSERT_FALSE(result);
  EXPECT_EQ(result.error().code, Errc::invalid);
  EXPECT_THAT(result.error().message, HasSubstr("'demo_pkg/_C.so' cannot be read"));
  EXPECT_EQ(std::distance(fs::directory_iterator(out_), fs::directory_iterator()), 0);
}

// ---------------------------------------------------------------------------------------------
// Real installers: Debian's `wheel` (verifies every RECORD hash while unpacking) and pip
// (rejects a wheel whose METADATA does not match its file name).

TEST_F(RetagTest, WheelUnpackAcceptsTheResult) {
  if (!python_has(kSystemPython, "wheel")) {
    GTEST_SKIP() << kSystemPython << " -m wheel is not available (Debian package python3-wheel)";
  }
  auto plain = retag_wheel(demo_wheel("1.0"), "cu128torch2.8", out_);
  ASSERT_TRUE(plain) << plain.error().message;
  expect_wheel_unpacks(*plain);

  const std::string old = "demo_pkg-1.0+cu126torch2.8";
  ZipEntry utf8_name(
      "demo_pkg/donn\xc3\xa9"
      "es.txt",
      "caf\xc3\xa9\n");
  utf8_name.flags = 0x0800U;  // names are UTF-8
  const fs::path data_wheel = write(
      old + "-1-py3-none-any.whl",
      {{"demo_pkg/__init__.py", ""},
       utf8_name,
       {"demo_pkg/a,b.txt", "comma"},
       {old + ".data/scripts/demo-tool", "#!python\n"},
       {old + ".dist-info/METADATA", metadata_for("1.0+cu126torch2.8")},
       {old + ".dist-info/WHEEL", "Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n"},
       {old + ".dist-info/RECORD", ""}});
  auto retagged = retag_wheel(data_wheel, "cu128torch2.8", out_);
  ASSERT_TRUE(retagged) << retagged.error().message;
  expect_wheel_unpacks(*retagged);
  const fs::path unpacked = dir_ / ("unpacked-" + retagged->filename().string()) /
                            "demo_pkg-1.0+cu128torch2.8" /
                            "demo_pkg/donn\xc3\xa9"
                            "es.txt";
  EXPECT_TRUE(fs::exists(unpacked)) << unpacked;
}

TEST_F(RetagTest, WheelUnpackRejectsAWrongRecordHash) {
  if (!python_has(kSystemPython, "wheel")) {
    GTEST_SKIP() << kSystemPython << " -m wheel is not available (Debian package python3-wheel)";
  }
  // The control: a wheel whose RECORD hash is wrong must fail, or the check above proves
  // nothing.
  const fs::path in =
      write("demo_pkg-1.0-py3-none-any.whl",
            {{"demo_pkg/__init__.py", "x = 1\n"},
             {"demo_pkg-1.0.dist-info/METADATA", metadata_for("1.0")},
             {"demo_pkg-1.0.dist-info/WHEEL", "Wheel-Version: 1.0\nTag: py3-none-any\n"},
             {"demo_pkg-1.0.dist-info/RECORD",
              "demo_pkg/__init__.py,sha256=AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA,6\n"
              "demo_pkg-1.0.dist-info/METADATA,,\ndemo_pkg-1.0.dist-info/WHEEL,,\n"
              "demo_pkg-1.0.dist-info/RECORD,,\n"}});
  const auto [status, output] = shell(std::string(kSystemPython) + " -m wheel unpack -d " +
                                      quote(dir_ / "control") + " " + quote(in));
  EXPECT_NE(status, 0) << output;
  EXPECT_THAT(output, HasSubstr("Hash mismatch"));
}

TEST_F(RetagTest, PipInstallsTheResult) {
  if (!python_has(kPipPython, "pip")) GTEST_SKIP() << kPipPython << " with pip is not available";
  auto result = retag_wheel(demo_wheel("2.8.3+cu126torch2.8"), "cu128torch2.8", out_);
  ASSERT_TRUE(result) << result.error().message;
  // The wheel is for cp311 on linux_x86_64, which this interpreter is.
  expect_pip_installs(*result, "demo-pkg==2.8.3+cu128torch2.8",
                      "demo_pkg-2.8.3+cu128torch2.8.dist-info");

  const std::string old = "demo_pkg-1.0";
  const fs::path data_wheel = write(
      old + "-1-py3-none-any.whl",
      {{"demo_pkg/__init__.py", ""},
       {old + ".data/scripts/demo-tool", "#!python\nprint('hi')\n"},
       {old + ".dist-info/METADATA", metadata_for("1.0")},
       {old + ".dist-info/WHEEL", "Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n"},
       {old + ".dist-info/RECORD", ""}});
  auto retagged = retag_wheel(data_wheel, "cpu", dir_ / "out-data");
  ASSERT_TRUE(retagged) << retagged.error().message;
  expect_pip_installs(*retagged, "demo-pkg==1.0+cpu", "demo_pkg-1.0+cpu.dist-info");
  EXPECT_TRUE(fs::exists(dir_ / ("file-" + retagged->filename().string()) / "bin" / "demo-tool"));
}

TEST_F(RetagTest, WheelUnpackAcceptsBuildAndPlatformTags) {
  if (!python_has(kSystemPython, "wheel")) {
    GTEST_SKIP() << kSystemPython << " -m wheel is not available (Debian package python3-wheel)";
  }
  WheelChanges changes;
  changes.local_label = "cu128torch2.8";
  changes.build_tag = "1";
  changes.platform_tags = std::vector<std::string>{"manylinux_2_17_x86_64", "manylinux2014_x86_64"};
  auto result = rewrite_wheel(demo_wheel("1.0"), changes, out_);
  ASSERT_TRUE(result) << result.error().message;
  expect_wheel_unpacks(*result);
}

TEST_F(RetagTest, PipInstallsManylinuxWheelsAndPrefersTheHigherBuild) {
  if (!python_has(kPipPython, "pip")) GTEST_SKIP() << kPipPython << " with pip is not available";
  const fs::path in = demo_wheel("2.8.3+cu128torch2.8");
  // Builds 1 and 2 of one version side by side, as a rebuild publishes them.
  WheelChanges changes;
  changes.platform_tags = std::vector<std::string>{"manylinux_2_17_x86_64", "manylinux2014_x86_64"};
  changes.build_tag = "1";
  auto first = rewrite_wheel(in, changes, out_);
  ASSERT_TRUE(first) << first.error().message;
  changes.build_tag = "2";
  auto second = rewrite_wheel(in, changes, out_);
  ASSERT_TRUE(second) << second.error().message;
  expect_pip_installs(*first, "demo-pkg==2.8.3+cu128torch2.8",
                      "demo_pkg-2.8.3+cu128torch2.8.dist-info");
  // Found by name, pip takes the higher build: its WHEEL says so.
  const fs::path by_name = dir_ / ("name-" + first->filename().string());
  EXPECT_THAT(read_file(by_name / "demo_pkg-2.8.3+cu128torch2.8.dist-info" / "WHEEL"),
              HasSubstr("Build: 2"));
}

TEST_F(RetagTest, PipRejectsAWheelWithAnInconsistentVersion) {
  if (!python_has(kPipPython, "pip")) GTEST_SKIP() << kPipPython << " with pip is not available";
  // The control for PipInstallsTheResult: the label only in the file name, as the broken
  // wheels of docs/torch-labels.md, "Labels extension projects use", have it.
  const fs::path in = write("demo_pkg-1.0+cu128-py3-none-any.whl",
                            {{"demo_pkg/__init__.py", ""},
                             {"demo_pkg-1.0+cu128.dist-info/METADATA", metadata_for("1.0")},
                             {"demo_pkg-1.0+cu128.dist-info/WHEEL",
                              "Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n"},
                             {"demo_pkg-1.0+cu128.dist-info/RECORD", ""}});
  const auto [status, output] =
      pip_install(dir_ / "control", "--find-links " + quote(in.parent_path()) + " demo-pkg");
  EXPECT_NE(status, 0) << output;
  EXPECT_THAT(output, HasSubstr("inconsistent version"));
}

}  // namespace
}  // namespace wf::archive
