#include "store/s3_xml.hpp"

#include <gtest/gtest.h>

namespace wf::store::xml {
namespace {

TEST(S3Xml, ReadsAListingPageWithEscapedKeys) {
  const std::string page =
      R"(<?xml version="1.0" encoding="UTF-8"?>)"
      R"(<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Name>b</Name>)"
      R"(<Prefix>idx/</Prefix><KeyCount>2</KeyCount><MaxKeys>2</MaxKeys>)"
      R"(<IsTruncated>true</IsTruncated><NextContinuationToken>1/a+b==</NextContinuationToken>)"
      R"(<Contents><Key>idx/a&amp;b&lt;c&gt;&quot;&apos;</Key><LastModified>2026-11-28T13:26:42.000Z</LastModified>)"
      R"(<ETag>&quot;abc&quot;</ETag><Size>12</Size><StorageClass>STANDARD</StorageClass></Contents>)"
      R"(<Contents><Key>idx/&#252;&#xFC;&#x1F600;</Key><Size>0</Size></Contents>)"
      R"(<ContentsOther>x</ContentsOther></ListBucketResult>)";
  const auto contents = elements(page, "Contents");
  ASSERT_EQ(contents.size(), 2U);
  EXPECT_EQ(text(contents[0], "Key"), "idx/a&b<c>\"'");
  EXPECT_EQ(text(contents[0], "Size"), "12");
  EXPECT_EQ(text(contents[0], "ETag"), "\"abc\"");
  EXPECT_EQ(text(contents[1], "Key"), "idx/\xc3\xbc\xc3\xbc\xf0\x9f\x98\x80");
  EXPECT_EQ(text(page, "IsTruncated"), "true");
  EXPECT_EQ(text(page, "NextContinuationToken"), "1/a+b==");
  EXPECT_EQ(text(page, "Missing"), std::nullopt);
}

TEST(S3Xml, ReadsTheDatesOfAListingAndOfAHead) {
  // 2026-11-28 13:26:42 UTC; gc compares these with its protection window.
  constexpr std::time_t kWhen = 1795872402;
  EXPECT_EQ(parse_time("2026-11-28T13:26:42.000Z"), kWhen);       // ListObjectsV2 (AWS, Swift)
  EXPECT_EQ(parse_time("2026-11-28T13:26:42Z"), kWhen);           // without fractions (MinIO)
  EXPECT_EQ(parse_time("Sat, 28 Nov 2026 13:26:42 GMT"), kWhen);  // a HEAD's Last-Modified
  const std::string page =
      R"(<ListBucketResult><Contents><Key>p/blobs/aa</Key>)"
      R"(<LastModified>2026-11-28T13:26:42.000Z</LastModified><Size>3</Size></Contents>)"
      R"(</ListBucketResult>)";
  const auto contents = elements(page, "Contents");
  ASSERT_EQ(contents.size(), 1U);
  EXPECT_EQ(parse_time(text(contents[0], "LastModified").value_or("")), kWhen);
  // Unknown: 0, never a time in the past that would make an object look old.
  EXPECT_EQ(parse_time(""), 0);
  EXPECT_EQ(parse_time("yesterday"), 0);
}

TEST(S3Xml, EmptyElementsAndUnknownEntities) {
  EXPECT_EQ(text("<R><Prefix/></R>", "Prefix"), "");
  EXPECT_EQ(unescape("a &unknown; &#0; &#xD800; & b"), "a &unknown; &#0; &#xD800; & b");
  EXPECT_EQ(escape("<a href='x'>&\"</a>"), "&lt;a href=&#39;x&#39;&gt;&amp;&quot;&lt;/a&gt;");
  EXPECT_EQ(unescape(escape("<&>\"'")), "<&>\"'");
}

TEST(S3Xml, ReadsAnErrorAnswer) {
  const std::string error =
      "<?xml version='1.0' encoding='UTF-8'?>\n<Error><Code>SignatureDoesNotMatch</Code>"
      "<Message>The request signature we calculated does not match the signature you "
      "provided.</Message><RequestId>tx1</RequestId></Error>";
  EXPECT_EQ(text(error, "Code"), "SignatureDoesNotMatch");
  EXPECT_NE(text(error, "Message")->find("does not match"), std::string::npos);
}

}  // namespace
}  // namespace wf::store::xml
