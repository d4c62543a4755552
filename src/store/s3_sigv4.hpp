#pragma once
// AWS Signature Version 4 for S3, as pure functions: the canonical request, the string to
// sign, the Authorization header and presigned query URLs (docs/storage.md, "Signing").
// No I/O and no clock: the time is an argument, so a test can hold each step against
// botocore's (tests/unit/store/sigv4_reference.py).

#include <ctime>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace wf::store::sigv4 {

/// The access key pair, never split or parsed: Swift's tempauth keys ("test:tester") carry a
/// colon. `secret_access_key` and `session_token` are secrets: never logged.
struct Credentials {
  std::string access_key_id;
  std::string secret_access_key;
  std::string session_token;  ///< "" for none
};

/// A name and a value, decoded (a query parameter) or as sent (a header).
using Pair = std::pair<std::string, std::string>;

/// The payload hash of a body that is not hashed (a streamed upload, a presigned URL).
inline constexpr std::string_view kUnsignedPayload = "UNSIGNED-PAYLOAD";
/// The SHA-256 of no bytes: the payload hash of GET, HEAD and DELETE.
inline constexpr std::string_view kEmptyPayloadHash =
    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

/// Percent-encodes every byte except the unreserved A-Z a-z 0-9 - _ . ~ (and '/' with
/// `keep_slash`): SigV4's URI encoding, applied once.
[[nodiscard]] std::string uri_encode(std::string_view s, bool keep_slash);

/// "YYYYMMDDTHHMMSSZ" (UTC), SigV4's timestamp.
[[nodiscard]] std::string amz_date(std::time_t t);

/// A request to sign.
struct Request {
  std::string method;         ///< "GET", "PUT", ...
  std::string host;           ///< the Host header as sent: "127.0.0.1:8080" (default ports omitted)
  std::string path;           ///< decoded, starting with '/': "/bucket/some key+1"
  std::vector<Pair> query;    ///< decoded parameters, in the order the target lists them
  std::vector<Pair> headers;  ///< further headers sent and signed (content-type, range)
  std::string payload_hash;   ///< lower-case hex SHA-256 of the body, or kUnsignedPayload
};

/// The encoded request target: each path segment URI-encoded once, then "?k=v&..." in the
/// request's order ("" values as "k=").
[[nodiscard]] std::string target(const Request& request);

/// A header-signed request and the steps that led to it.
struct Signed {
  std::string canonical_request;
  std::string string_to_sign;
  std::string signature;      ///< lower-case hex
  std::string authorization;  ///< the Authorization header's value
  /// Every header to send, Authorization last: host, the request's headers, x-amz-date,
  /// x-amz-content-sha256 and x-amz-security-token (with a session token).
  std::vector<Pair> headers;
};

/// Signs `request` with an Authorization header (every header of `headers` is signed) for
/// service s3 in `region` at time `now`.
[[nodiscard]] Signed sign(const Request& request, const Credentials& credentials,
                          std::string_view region, std::time_t now);

/// A presigned URL and the steps that led to it.
struct Presigned {
  std::string canonical_request;
  std::string string_to_sign;
  std::string signature;
  std::string url;
};

/// A presigned URL for `request` (its headers are ignored: only host is signed; its payload
/// is UNSIGNED-PAYLOAD), valid `expires_seconds` (1 to 604800) from `now`. The query lists
/// the request's parameters, then X-Amz-Algorithm, -Credential, -Date, -Expires,
/// -SignedHeaders (and -Security-Token), then X-Amz-Signature: botocore's order.
[[nodiscard]] Presigned presign(std::string_view scheme, const Request& request,
                                const Credentials& credentials, std::string_view region,
                                std::time_t now, long expires_seconds);

}  // namespace wf::store::sigv4
