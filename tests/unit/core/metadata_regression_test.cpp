// Regressions found by differential runs of tests/fuzz/metadata_fuzz.cpp's corpus against
// Python's email parser (which pip and packaging use to read METADATA).

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "wheelforge/core/metadata.hpp"

namespace wf::core {
namespace {

// Python ends a header line at CRLF, LF or a lone CR. Reading a lone CR as part of the line
// let one Requires-Dist line hide a second one that pip sees (here the torch pin).
TEST(MetadataRegression, LoneCrEndsALineAsInPython) {
  const auto m = parse_core_metadata(
      "Metadata-Version: 2.1\nName: demo\nVersion: 1.0\n"
      "Requires-Dist: numpy\rRequires-Dist: torch==2.8.*\n");
  ASSERT_TRUE(m.ok()) << m.error().message;
  EXPECT_EQ(m->requires_dist, (std::vector<std::string>{"numpy", "torch==2.8.*"}));
}

TEST(MetadataRegression, CrOnlyLineEndings) {
  const auto m = parse_core_metadata("Metadata-Version: 2.1\rName: demo\rVersion: 1.0\r\rbody\r");
  ASSERT_TRUE(m.ok()) << m.error().message;
  EXPECT_EQ(m->name, "demo");
  EXPECT_EQ(m->version, "1.0");
}

// Two CRs are an empty line to Python: the header block ends there, so Name and Version below
// it are description text.
TEST(MetadataRegression, LoneCrBlankLineEndsTheHeaderBlock) {
  EXPECT_FALSE(parse_core_metadata("Metadata-Version: 2.1\r\rName: demo\nVersion: 1.0\n").ok());
}

TEST(MetadataRegression, WheelFileWithLoneCr) {
  const auto tags = parse_wheel_file("Wheel-Version: 1.0\rTag: py3-none-any\rTag: py2-none-any\n");
  ASSERT_TRUE(tags.ok()) << tags.error().message;
  EXPECT_EQ(*tags, (std::vector<std::string>{"py3-none-any", "py2-none-any"}));
}

}  // namespace
}  // namespace wf::core
