#include "wheelforge/core/metadata.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace wf::core {
namespace {

using Strings = std::vector<std::string>;

bool contains(const std::string& haystack, std::string_view needle) {
  return haystack.find(needle) != std::string::npos;
}

TEST(CoreMetadata, ParsesATypicalWheelMetadata) {
  const std::string_view text =
      "Metadata-Version: 2.1\n"
      "Name: flash_attn\n"
      "Version: 2.8.3+cu128torch2.8cxx11abiTRUE\n"
      "Summary: Flash Attention: Fast and Memory-Efficient Exact Attention\n"
      "Home-page: https://github.com/Dao-AILab/flash-attention\n"
      "Requires-Python: >=3.9\n"
      "Description-Content-Type: text/markdown\n"
      "License-File: LICENSE\n"
      "Requires-Dist: torch\n"
      "Requires-Dist: einops\n"
      "Requires-Dist: pytest; extra == \"test\"\n"
      "\n"
      "# FlashAttention\n"
      "Name: not-a-header\n"
      "Requires-Dist: not-a-requirement\n";
  const auto parsed = parse_core_metadata(text);
  ASSERT_TRUE(parsed.ok()) << parsed.error().message;
  EXPECT_EQ(parsed->metadata_version, "2.1");
  EXPECT_EQ(parsed->name, "flash_attn");
  EXPECT_EQ(parsed->version, "2.8.3+cu128torch2.8cxx11abiTRUE");
  EXPECT_EQ(parsed->summary, "Flash Attention: Fast and Memory-Efficient Exact Attention");
  EXPECT_EQ(parsed->requires_python, ">=3.9");
  EXPECT_EQ(parsed->requires_dist, (Strings{"torch", "einops", "pytest; extra == \"test\""}));
}

TEST(CoreMetadata, OptionalFieldsMayBeAbsent) {
  const auto parsed = parse_core_metadata("Metadata-Version: 1.0\nName: a\nVersion: 1\n");
  ASSERT_TRUE(parsed.ok()) << parsed.error().message;
  EXPECT_FALSE(parsed->summary.has_value());
  EXPECT_FALSE(parsed->requires_python.has_value());
  EXPECT_TRUE(parsed->requires_dist.empty());
}

TEST(CoreMetadata, HandlesCrLfAndNoFinalNewline) {
  const auto parsed = parse_core_metadata(
      "Metadata-Version: 2.4\r\nName: pkg\r\nVersion: 1.0\r\nRequires-Dist: a\r\n"
      "Requires-Dist: b");
  ASSERT_TRUE(parsed.ok()) << parsed.error().message;
  EXPECT_EQ(parsed->name, "pkg");
  EXPECT_EQ(parsed->version, "1.0");
  EXPECT_EQ(parsed->requires_dist, (Strings{"a", "b"}));
}

TEST(CoreMetadata, HeadersEndAtTheFirstEmptyLineInCrLf) {
  const auto parsed = parse_core_metadata(
      "Metadata-Version: 2.1\r\nName: pkg\r\nVersion: 1.0\r\n\r\nRequires-Dist: body\r\n");
  ASSERT_TRUE(parsed.ok()) << parsed.error().message;
  EXPECT_TRUE(parsed->requires_dist.empty());
}

TEST(CoreMetadata, FieldNamesAreCaseInsensitive) {
  const auto parsed = parse_core_metadata(
      "metadata-version: 2.1\nNAME: pkg\nversion: 1.0\nrequires-dist: a\nREQUIRES-DIST: b\n"
      "requires-python: >=3.10\nsummary: s\n");
  ASSERT_TRUE(parsed.ok()) << parsed.error().message;
  EXPECT_EQ(parsed->name, "pkg");
  EXPECT_EQ(parsed->requires_dist, (Strings{"a", "b"}));
  EXPECT_EQ(parsed->requires_python, ">=3.10");
  EXPECT_EQ(parsed->summary, "s");
}

TEST(CoreMetadata, ContinuationLinesJoinWithNewline) {
  const auto parsed = parse_core_metadata(
      "Metadata-Version: 2.1\n"
      "Name: pkg\n"
      "Version: 1.0\n"
      "Summary: first line\n"
      "  second line\n"
      "\tthird line\n"
      "Description: long text\n"
      "        |  with a continuation\n"
      "        |\n"
      "Requires-Dist: numpy\n"
      "  >=1.26\n");
  ASSERT_TRUE(parsed.ok()) << parsed.error().message;
  EXPECT_EQ(parsed->summary, "first line\nsecond line\nthird line");
  EXPECT_EQ(parsed->requires_dist, (Strings{"numpy\n>=1.26"}));
}

TEST(CoreMetadata, ValuesAreTrimmed) {
  const auto parsed =
      parse_core_metadata("Metadata-Version:2.1\nName:   pkg  \nVersion:\t1.0\t\nSummary:\n");
  ASSERT_TRUE(parsed.ok()) << parsed.error().message;
  EXPECT_EQ(parsed->metadata_version, "2.1");
  EXPECT_EQ(parsed->name, "pkg");
  EXPECT_EQ(parsed->version, "1.0");
  EXPECT_EQ(parsed->summary, "");
}

TEST(CoreMetadata, Utf8ValuesAreKept) {
  const auto parsed = parse_core_metadata(
      "Metadata-Version: 2.1\nName: pkg\nVersion: 1.0\nSummary: Caf\xc3\xa9 \xe2\x82\xac "
      "\xf0\x9f\x9a\x80\n");
  ASSERT_TRUE(parsed.ok()) << parsed.error().message;
  EXPECT_EQ(parsed->summary, "Caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x9a\x80");
}

TEST(CoreMetadata, ReportsEveryMissingRequiredField) {
  const auto none = parse_core_metadata("Summary: nothing else\n");
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.error().code, Errc::invalid);
  EXPECT_TRUE(contains(none.error().message, "Metadata-Version is missing"));
  EXPECT_TRUE(contains(none.error().message, "Name is missing"));
  EXPECT_TRUE(contains(none.error().message, "Version is missing"));

  const auto no_version = parse_core_metadata("Metadata-Version: 2.1\nName: pkg\n");
  ASSERT_FALSE(no_version.ok());
  EXPECT_EQ(no_version.error().message, "invalid core metadata: required field Version is missing");

  const auto empty = parse_core_metadata("");
  ASSERT_FALSE(empty.ok());
  EXPECT_TRUE(contains(empty.error().message, "Name is missing"));

  const auto blank = parse_core_metadata("Metadata-Version: 2.1\nName:\nVersion:  \n");
  ASSERT_FALSE(blank.ok());
  EXPECT_TRUE(contains(blank.error().message, "Name is empty"));
  EXPECT_TRUE(contains(blank.error().message, "Version is empty"));
}

TEST(CoreMetadata, MetadataVersionMustBeKnown) {
  for (const char* known : {"1.0", "1.1", "1.2", "2.0", "2.1", "2.2", "2.3", "2.4", "2.5"}) {
    const auto parsed =
        parse_core_metadata(std::string("Metadata-Version: ") + known + "\nName: p\nVersion: 1\n");
    EXPECT_TRUE(parsed.ok()) << known << ": " << parsed.error().message;
  }
  for (const char* unknown : {"3.0", "1.3", "0.9", "2", "2.x", "two", "2.1.1", "10.0", "-2.1"}) {
    const auto parsed = parse_core_metadata(std::string("Metadata-Version: ") + unknown +
                                            "\nName: p\nVersion: 1\n");
    ASSERT_FALSE(parsed.ok()) << unknown;
    EXPECT_EQ(parsed.error().code, Errc::invalid);
    EXPECT_TRUE(contains(parsed.error().message,
                         std::string("Metadata-Version \"") + unknown + "\" is not supported"))
        << parsed.error().message;
  }
  // Reported together with the other problems.
  const auto both = parse_core_metadata("Metadata-Version: 3.0\nName: p\n");
  ASSERT_FALSE(both.ok());
  EXPECT_TRUE(contains(both.error().message, "3.0"));
  EXPECT_TRUE(contains(both.error().message, "Version is missing"));
}

TEST(CoreMetadata, RequiredFieldsInTheBodyDoNotCount) {
  const auto parsed = parse_core_metadata("Metadata-Version: 2.1\n\nName: pkg\nVersion: 1.0\n");
  ASSERT_FALSE(parsed.ok());
  EXPECT_TRUE(contains(parsed.error().message, "Name is missing"));
}

TEST(CoreMetadata, RepeatedSingleFieldsAreRejected) {
  const auto parsed = parse_core_metadata(
      "Metadata-Version: 2.1\nName: good\nName: evil\nVersion: 1.0\nVersion: 2.0\n");
  ASSERT_FALSE(parsed.ok());
  EXPECT_TRUE(contains(parsed.error().message, "field Name appears 2 times"));
  EXPECT_TRUE(contains(parsed.error().message, "field Version appears 2 times"));
}

TEST(CoreMetadata, ALineThatIsNoFieldStartsTheBody) {
  // As in Python's email parser: the malformed line and everything after it is the body.
  const auto parsed = parse_core_metadata(
      "Metadata-Version: 2.1\nName: pkg\nVersion: 1.0\nthis is not a header\nRequires-Dist: x\n");
  ASSERT_TRUE(parsed.ok()) << parsed.error().message;
  EXPECT_TRUE(parsed->requires_dist.empty());

  const auto bad_name = parse_core_metadata("Metadata-Version: 2.1\nName: pkg\nBad Field: 1\n");
  ASSERT_FALSE(bad_name.ok());
  EXPECT_TRUE(contains(bad_name.error().message, "Version is missing"));
}

TEST(CoreMetadata, LeadingContinuationIsIgnored) {
  const auto parsed =
      parse_core_metadata("  stray\nMetadata-Version: 2.1\nName: pkg\nVersion: 1.0\n");
  ASSERT_TRUE(parsed.ok()) << parsed.error().message;
  EXPECT_EQ(parsed->metadata_version, "2.1");
}

const std::string_view kNotUtf8[] = {
    "\xff",
    "\xc3",                  // truncated two-byte sequence
    "\xc3\x28",              // bad continuation byte
    "\xc0\xaf",              // overlong '/'
    "\xe0\x80\xaf",          // overlong '/'
    "\xed\xa0\x80",          // UTF-16 surrogate
    "\xf4\x90\x80\x80",      // above U+10FFFF
    "\xf8\x88\x80\x80\x80",  // five-byte form
    "\x80",                  // lone continuation byte
    "\xe2\x82",              // truncated three-byte sequence
};

TEST(CoreMetadata, RejectsNonUtf8Anywhere) {
  for (const auto bad : kNotUtf8) {
    const std::string header = "Metadata-Version: 2.1\nName: pkg\nVersion: 1.0\nSummary: x";
    const auto in_header = parse_core_metadata(header + std::string(bad) + "\n");
    ASSERT_FALSE(in_header.ok());
    EXPECT_EQ(in_header.error().code, Errc::invalid);
    EXPECT_TRUE(contains(in_header.error().message, "not valid UTF-8"));
    EXPECT_TRUE(contains(in_header.error().message, "offset " + std::to_string(header.size())))
        << in_header.error().message;

    const auto in_body = parse_core_metadata(header + "\n\n" + std::string(bad));
    EXPECT_FALSE(in_body.ok());
  }
}

TEST(CoreMetadata, AcceptsBoundaryCodePoints) {
  // U+0080, U+07FF, U+0800, U+D7FF, U+E000, U+FFFF, U+10000, U+10FFFF.
  const std::string summary =
      "\xc2\x80\xdf\xbf\xe0\xa0\x80\xed\x9f\xbf\xee\x80\x80\xef\xbf\xbf\xf0\x90\x80\x80"
      "\xf4\x8f\xbf\xbf";
  const auto parsed =
      parse_core_metadata("Metadata-Version: 2.1\nName: p\nVersion: 1\nSummary: " + summary);
  ASSERT_TRUE(parsed.ok()) << parsed.error().message;
  EXPECT_EQ(parsed->summary, summary);
}

TEST(WheelFile, ReturnsTagsInOrder) {
  const auto parsed = parse_wheel_file(
      "Wheel-Version: 1.0\n"
      "Generator: bdist_wheel (0.45.1)\n"
      "Root-Is-Purelib: false\n"
      "Tag: cp312-cp312-manylinux_2_17_x86_64\n"
      "Tag: cp312-cp312-manylinux2014_x86_64\n"
      "\n");
  ASSERT_TRUE(parsed.ok()) << parsed.error().message;
  EXPECT_EQ(*parsed,
            (Strings{"cp312-cp312-manylinux_2_17_x86_64", "cp312-cp312-manylinux2014_x86_64"}));
}

TEST(WheelFile, AcceptsAnyMinorOfVersionOne) {
  for (const auto version : {"1.0", "1.1", "1.9", "1", "1.0.0"}) {
    const auto parsed = parse_wheel_file("Wheel-Version: " + std::string(version) + "\r\n");
    ASSERT_TRUE(parsed.ok()) << version << ": " << parsed.error().message;
    EXPECT_TRUE(parsed->empty());
  }
  EXPECT_TRUE(parse_wheel_file("wheel-version: 1.0\ntag: py3-none-any\n").ok());
}

TEST(WheelFile, RejectsOtherMajorVersions) {
  for (const auto version : {"2.0", "0.9", "10.0"}) {
    const auto parsed = parse_wheel_file("Wheel-Version: " + std::string(version) + "\n");
    ASSERT_FALSE(parsed.ok()) << version;
    EXPECT_EQ(parsed.error().code, Errc::invalid);
    EXPECT_TRUE(contains(parsed.error().message, "only 1.x")) << parsed.error().message;
    EXPECT_TRUE(contains(parsed.error().message, "\"" + std::string(version) + "\""));
  }
}

TEST(WheelFile, RejectsMalformedOrMissingVersion) {
  for (const auto version : {"one", "1.x", "1.", ".1", "-1.0", "1.0 beta"}) {
    const auto parsed = parse_wheel_file("Wheel-Version: " + std::string(version) + "\n");
    ASSERT_FALSE(parsed.ok()) << version;
    EXPECT_TRUE(contains(parsed.error().message, "MAJOR.MINOR")) << parsed.error().message;
  }
  const auto missing = parse_wheel_file("Generator: x\nTag: py3-none-any\n");
  ASSERT_FALSE(missing.ok());
  EXPECT_TRUE(contains(missing.error().message, "Wheel-Version is missing"));
  const auto twice = parse_wheel_file("Wheel-Version: 1.0\nWheel-Version: 2.0\n");
  ASSERT_FALSE(twice.ok());
  EXPECT_TRUE(contains(twice.error().message, "appears 2 times"));
  EXPECT_FALSE(parse_wheel_file("Wheel-Version: 1.0\nTag: \xff\n").ok());
}

TEST(ProjectInfo, ReadsThePageFieldsAndTheBodyDescription) {
  const std::string metadata =
      "Metadata-Version: 2.4\r\nName: flash-attn\r\nVersion: 2.8.3\r\n"
      "Summary: Flash Attention: fast and memory-efficient exact attention\r\n"
      "Author: Tri Dao\r\nAuthor-email: tri@example.com\r\n"
      "Maintainer-email: Team <team@example.com>\r\n"
      "License-Expression: BSD-3-Clause\r\nLicense: BSD\r\n"
      "Home-page: https://example.com/home\r\n"
      "Project-URL: Source, https://example.com/src\r\nProject-URL: Docs,https://example.com/d\r\n"
      "Project-URL: broken\r\n"
      "Classifier: Programming Language :: Python :: 3\r\nClassifier: License :: OSI Approved\r\n"
      "Requires-Python: >=3.9\r\nRequires-Dist: torch\r\nRequires-Dist: einops; extra == 'x'\r\n"
      "Keywords: cuda,attention\r\n"
      "Description-Content-Type: text/markdown\r\n\r\n# Flash\r\n\r\n    indented code\r\n";
  const ProjectInfo info = parse_project_info(metadata);
  EXPECT_EQ(info.summary, "Flash Attention: fast and memory-efficient exact attention");
  EXPECT_EQ(info.author, "Tri Dao");
  EXPECT_EQ(info.author_email, "tri@example.com");
  EXPECT_EQ(info.maintainer_email, "Team <team@example.com>");
  EXPECT_EQ(info.license_expression, "BSD-3-Clause");
  EXPECT_EQ(info.license, "BSD");
  EXPECT_EQ(info.home_page, "https://example.com/home");
  ASSERT_EQ(info.project_urls.size(), 2U);
  EXPECT_EQ(info.project_urls[0],
            (std::pair<std::string, std::string>{"Source", "https://example.com/src"}));
  EXPECT_EQ(info.project_urls[1].first, "Docs");
  EXPECT_EQ(info.project_urls[1].second, "https://example.com/d");
  EXPECT_EQ(info.classifiers,
            (Strings{"Programming Language :: Python :: 3", "License :: OSI Approved"}));
  EXPECT_EQ(info.requires_python, ">=3.9");
  EXPECT_EQ(info.requires_dist, (Strings{"torch", "einops; extra == 'x'"}));
  EXPECT_EQ(info.keywords, "cuda,attention");
  EXPECT_EQ(info.description_content_type, "text/markdown");
  EXPECT_EQ(info.description, "# Flash\r\n\r\n    indented code\r\n");
}

TEST(ProjectInfo, UnfoldsTheDescriptionField) {
  // setuptools before metadata 2.1: 8 spaces and '|' before each continuation line.
  const std::string metadata =
      "Metadata-Version: 1.2\nName: old\nVersion: 1.0\nDescription: Old project\n"
      "        |=========\n        |\n        |    indented\n        plain\n"
      "License: MIT License\n        \n        Permission is hereby granted\n";
  const ProjectInfo info = parse_project_info(metadata);
  EXPECT_EQ(info.description, "Old project\n=========\n\n    indented\nplain");
  EXPECT_TRUE(info.description_content_type.empty());
  EXPECT_EQ(info.license, "MIT License\n\nPermission is hereby granted");
}

TEST(ProjectInfo, TheBodyWinsOverTheFieldAndBadBytesGiveNothing) {
  const ProjectInfo info = parse_project_info(
      "Metadata-Version: 2.1\nName: a\nVersion: 1\nDescription: field\n\nbody text\n");
  EXPECT_EQ(info.description, "body text\n");
  EXPECT_TRUE(parse_project_info("Name: a\nSummary: \xff\n").summary.empty());
  // A line that is no field starts the body, as Python's email parser reads it.
  EXPECT_EQ(parse_project_info("Name: a\nnot a field\nmore\n").description, "not a field\nmore\n");
  EXPECT_TRUE(parse_project_info("Name: a\n\n  \n").description.empty());
}

}  // namespace
}  // namespace wf::core
