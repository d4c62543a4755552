// Signature V4 held byte for byte against botocore: each case is signed here and by
// sigv4_reference.py (S3SigV4Auth, boto3's generate_presigned_url) at the same fixed time.
// A missing botocore fails these tests.

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "store/s3_sigv4.hpp"
#include "wheelforge/crypto/digest.hpp"
#include "wheelforge/store/object_store.hpp"

namespace wf::store::sigv4 {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr std::time_t kTime = 1795780800;  // 2026-11-27T12:00:00Z

const Credentials kSwift{"test:tester", "testing", ""};
const Credentials kAws{"AKIAIOSFODNN7EXAMPLE", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", ""};
const Credentials kTemporary{"ASIAEXAMPLE:with:colons",
                             "se/cret+key=", "FwoGZXIvYXdzEJr//////////wEaDH+token/with=chars"};

struct SignCase {
  std::string name;
  std::string scheme;
  Request request;
  Credentials credentials;
  std::string region = "us-east-1";
  std::string body;  // hashed unless the payload is unsigned
};

struct PresignCase {
  std::string name;
  std::string endpoint;
  std::string addressing;  // "path" or "virtual"
  std::string bucket;
  std::string key;
  std::string disposition;
  std::string content_type;
  long expires;
  Credentials credentials;
  std::string region = "us-east-1";
};

std::vector<SignCase> sign_cases() {
  std::vector<SignCase> cases;
  {
    SignCase c{"put_payload_hash", "http", {}, kSwift, "us-east-1", ""};
    c.body = "hello wheel";
    c.request = {"PUT",
                 "127.0.0.1:8080",
                 "/wheelforge/idx/a b+c=d%41\xc3\xbc.whl",
                 {},
                 {{"Content-Type", "application/octet-stream"}},
                 crypto::sha256_hex(c.body)};
    cases.push_back(c);
  }
  {
    SignCase c{"get_range", "https", {}, kAws, "eu-west-1", ""};
    c.request = {"GET", "s3.eu-west-1.amazonaws.com", "/bucket/idx/blobs/ab/cd/abcdef",
                 {},    {{"Range", "bytes=100-199"}}, std::string(kEmptyPayloadHash)};
    cases.push_back(c);
  }
  {
    SignCase c{"head_session_token", "http", {}, kTemporary, "us-east-1", ""};
    c.request = {
        "HEAD", "localhost:9000", "/b/key=with=equals", {}, {}, std::string(kEmptyPayloadHash)};
    cases.push_back(c);
  }
  {
    SignCase c{"list_continuation", "http", {}, kSwift, "us-east-1", ""};
    c.request = {"GET",
                 "127.0.0.1:8080",
                 "/wheelforge",
                 {{"list-type", "2"},
                  {"prefix", "idx/blobs/"},
                  {"max-keys", "2"},
                  {"continuation-token", "1/abc+def=="}},
                 {},
                 std::string(kEmptyPayloadHash)};
    cases.push_back(c);
  }
  {
    SignCase c{"list_empty_prefix", "http", {}, kSwift, "us-east-1", ""};
    c.request = {"GET",
                 "127.0.0.1:8080",
                 "/wheelforge",
                 {{"list-type", "2"}, {"prefix", ""}},
                 {},
                 std::string(kEmptyPayloadHash)};
    cases.push_back(c);
  }
  {
    SignCase c{"put_unsigned_payload", "https", {}, kAws, "us-east-1", ""};
    c.request = {"PUT",
                 "s3.amazonaws.com",
                 "/bucket/big file.whl",
                 {},
                 {{"Content-Type", "application/zip"}},
                 std::string(kUnsignedPayload)};
    cases.push_back(c);
  }
  {
    SignCase c{"multipart_initiate", "http", {}, kSwift, "us-east-1", ""};
    c.request = {"POST",
                 "127.0.0.1:8080",
                 "/wheelforge/idx/f",
                 {{"uploads", ""}},
                 {{"Content-Type", "application/octet-stream"}},
                 std::string(kEmptyPayloadHash)};
    cases.push_back(c);
  }
  {
    SignCase c{"multipart_part", "http", {}, kTemporary, "us-east-1", ""};
    c.request = {"PUT",
                 "127.0.0.1:8080",
                 "/wheelforge/idx/f",
                 {{"partNumber", "3"}, {"uploadId", "MjAyNi0xMS0yN1Q+/x=="}},
                 {},
                 std::string(kUnsignedPayload)};
    cases.push_back(c);
  }
  return cases;
}

std::vector<PresignCase> presign_cases() {
  return {
      {"presign_disposition", "http://127.0.0.1:8080", "path", "wheelforge", "idx/blobs/ab/cd/abcd",
       "attachment; filename=\"flash_attn-2.6.3+cu124-cp312.whl\"", "application/octet-stream", 300,
       kSwift, "us-east-1"},
      {"presign_odd_key_token", "http://127.0.0.1:8080", "path", "wheelforge", "a b+c=d%41\xc3\xbc",
       "", "text/plain; charset=utf-8", 604800, kTemporary, "us-east-1"},
      {"presign_plain", "https://s3.eu-central-1.amazonaws.com", "path", "bucket", "k", "", "", 1,
       kAws, "eu-central-1"},
      {"presign_virtual", "http://s3.example.test:9000", "virtual", "wheelforge", "idx/x y", "", "",
       900, kSwift, "us-east-1"},
  };
}

std::string host_of(std::string_view endpoint) {
  return std::string(endpoint.substr(endpoint.find("://") + 3));
}

/// This side's presign of a case, as the store does it.
Presigned presign_case(const PresignCase& c) {
  Request r;
  r.method = "GET";
  const std::string scheme(c.endpoint.substr(0, c.endpoint.find("://")));
  if (c.addressing == "virtual") {
    r.host = c.bucket + "." + host_of(c.endpoint);
    r.path = "/" + c.key;
  } else {
    r.host = host_of(c.endpoint);
    r.path = "/" + c.bucket + "/" + c.key;
  }
  if (!c.disposition.empty()) r.query.emplace_back("response-content-disposition", c.disposition);
  if (!c.content_type.empty()) r.query.emplace_back("response-content-type", c.content_type);
  return presign(scheme, r, c.credentials, c.region, kTime, c.expires);
}

/// botocore's answers for every case, run once.
const json& reference() {
  static const json answers = [] {
    json cases = json::array();
    for (const auto& c : sign_cases()) {
      json headers = json::array();
      for (const auto& [k, v] : c.request.headers) headers.push_back({k, v});
      cases.push_back({{"name", c.name},
                       {"kind", "sign"},
                       {"method", c.request.method},
                       {"url", c.scheme + "://" + c.request.host + target(c.request)},
                       {"headers", headers},
                       {"body", c.body},
                       {"unsigned_payload", c.request.payload_hash == kUnsignedPayload},
                       {"access_key", c.credentials.access_key_id},
                       {"secret", c.credentials.secret_access_key},
                       {"token", c.credentials.session_token},
                       {"region", c.region},
                       {"time", kTime}});
    }
    for (const auto& c : presign_cases()) {
      json params = json::object();
      if (!c.disposition.empty()) params["ResponseContentDisposition"] = c.disposition;
      if (!c.content_type.empty()) params["ResponseContentType"] = c.content_type;
      cases.push_back({{"name", c.name},
                       {"kind", "presign"},
                       {"endpoint", c.endpoint},
                       {"addressing", c.addressing},
                       {"bucket", c.bucket},
                       {"key", c.key},
                       {"params", params},
                       {"expires", c.expires},
                       {"access_key", c.credentials.access_key_id},
                       {"secret", c.credentials.secret_access_key},
                       {"token", c.credentials.session_token},
                       {"region", c.region},
                       {"time", kTime}});
    }
    const fs::path input =
        fs::temp_directory_path() / ("wf-sigv4-" + std::to_string(::getpid()) + ".json");
    std::ofstream(input) << json{{"cases", cases}}.dump();
    const std::string command = "/usr/bin/python3 " WF_SOURCE_DIR
                                "/tests/unit/store/sigv4_reference.py < " +
                                input.string();
    std::string out;
    if (FILE* pipe = ::popen(command.c_str(), "r")) {
      char buf[4096];
      std::size_t n = 0;
      while ((n = std::fread(buf, 1, sizeof buf, pipe)) > 0) out.append(buf, n);
      const int rc = ::pclose(pipe);
      fs::remove(input);
      if (rc != 0) return json{{"error", "sigv4_reference.py failed (" + std::to_string(rc) + ")"}};
    }
    return json::parse(out, nullptr, false);
  }();
  return answers;
}

TEST(Sigv4, BotocoreIsThere) {
  ASSERT_TRUE(reference().is_object()) << "sigv4_reference.py printed no JSON";
  ASSERT_FALSE(reference().contains("error")) << reference()["error"];
}

TEST(Sigv4, HeaderSigningMatchesBotocore) {
  ASSERT_FALSE(reference().contains("error")) << reference().dump();
  for (const auto& c : sign_cases()) {
    SCOPED_TRACE(c.name);
    const json& want = reference().at(c.name);
    const Signed s = sign(c.request, c.credentials, c.region, kTime);
    EXPECT_EQ(s.canonical_request, want.at("canonical_request").get<std::string>());
    EXPECT_EQ(s.string_to_sign, want.at("string_to_sign").get<std::string>());
    EXPECT_EQ(s.authorization, want.at("authorization").get<std::string>());
  }
}

TEST(Sigv4, PresignedUrlsMatchBotocore) {
  ASSERT_FALSE(reference().contains("error")) << reference().dump();
  for (const auto& c : presign_cases()) {
    SCOPED_TRACE(c.name);
    const json& want = reference().at(c.name);
    const Presigned p = presign_case(c);
    EXPECT_EQ(p.canonical_request, want.at("canonical_request").get<std::string>());
    EXPECT_EQ(p.string_to_sign, want.at("string_to_sign").get<std::string>());
    EXPECT_EQ(p.url, want.at("url").get<std::string>());
  }
}

TEST(Sigv4, EncodesEachSegmentOnceAndKeepsColonsInKeys) {
  EXPECT_EQ(uri_encode("a b+c=d%41\xc3\xbc/~x", true), "a%20b%2Bc%3Dd%2541%C3%BC/~x");
  EXPECT_EQ(uri_encode("a/b", false), "a%2Fb");
  const Signed s = sign({"GET", "h", "/b/k", {}, {}, std::string(kEmptyPayloadHash)}, kSwift,
                        "us-east-1", kTime);
  EXPECT_NE(s.authorization.find("Credential=test:tester/20261127/us-east-1/s3/aws4_request"),
            std::string::npos);
  EXPECT_EQ(amz_date(kTime), "20261127T120000Z");
}

// A URL signed a moment ago for the same answer is given again while at least four fifths of
// its validity is left; another answer, or an older URL, is signed anew (and is the URL that
// signing at that time gives).
TEST(Sigv4, TheStoreGivesARecentPresignedUrlAgain) {
  S3Config config;
  config.endpoint = "http://127.0.0.1:8080";
  config.bucket = "wheelforge";
  config.prefix = "idx";
  config.access_key_id = kSwift.access_key_id;
  config.secret_access_key = kSwift.secret_access_key;
  auto store = open_s3_store(config);
  ASSERT_TRUE(store.ok()) << store.error().message;
  const auto url = [&](std::time_t now, std::chrono::seconds expires = std::chrono::seconds(300),
                       std::string_view type = "application/octet-stream") {
    return (*store)->presign_get("blobs/ab/cd/abcd", expires, type, "attachment", now);
  };
  const std::string first = url(kTime);
  EXPECT_NE(first.find("X-Amz-Date=20261127T120000Z"), std::string::npos) << first;
  EXPECT_EQ(url(kTime + 59), first) << "300 s URLs are given again for 60 s";
  const std::string later = url(kTime + 60);
  EXPECT_NE(later, first);
  EXPECT_NE(later.find("X-Amz-Date=20261127T120100Z"), std::string::npos) << later;
  EXPECT_NE(url(kTime + 61, std::chrono::seconds(300), "text/plain"), later) << "another answer";
  // A short validity is reused for a fifth of it; below 5 s never.
  const std::string short_url = url(kTime + 100, std::chrono::seconds(20));
  EXPECT_EQ(url(kTime + 103, std::chrono::seconds(20)), short_url);
  EXPECT_NE(url(kTime + 104, std::chrono::seconds(20)), short_url);
  const std::string tiny = url(kTime + 200, std::chrono::seconds(4));
  EXPECT_NE(url(kTime + 200, std::chrono::seconds(4)).find("X-Amz-Expires=4"), std::string::npos);
  EXPECT_NE(url(kTime + 201, std::chrono::seconds(4)), tiny);
  // A clock that went back signs anew rather than hand out a URL from the future.
  const std::string at150 = url(kTime + 150);
  const std::string at140 = url(kTime + 140);
  EXPECT_NE(at140, at150);
  EXPECT_NE(at140.find("X-Amz-Date=20261127T120220Z"), std::string::npos) << at140;
}

}  // namespace
}  // namespace wf::store::sigv4
