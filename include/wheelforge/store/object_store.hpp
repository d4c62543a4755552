#pragma once
// An S3-compatible object store (AWS S3, MinIO, Ceph RGW, Cloudflare R2, OpenStack Swift's
// s3api) as the durable tier of the blob store: the client the store module speaks to it
// with. Requests are signed with AWS Signature Version 4 (docs/storage.md).
// Every call except presign_get() blocks on the network: call from worker threads.
//
// Errors: unavailable when the store cannot be reached, times out or answers 5xx (the message
// names the endpoint and bucket, never a credential); not_found for an absent object or
// bucket; forbidden when the store refuses the credentials or signature (403); internal for
// any other answer, with the store's error code and message.

#include <chrono>
#include <cstdint>
#include <ctime>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "wheelforge/util/result.hpp"

namespace wf::store {

/// Why a request to the object store failed, as the metrics count it.
enum class RequestFailure : std::uint8_t {
  none,          ///< an answer the client expected (2xx; 404 and 416 are answers too)
  unreachable,   ///< no answer: refused, timed out, reset, name not resolved
  server_error,  ///< a 5xx answer
  denied,        ///< 403: the store refused the credentials or the signature
  rejected,      ///< another 4xx answer
};

/// "unreachable", "server_error", "denied", "rejected" ("none" for none): a metrics label.
[[nodiscard]] std::string_view request_failure_name(RequestFailure failure);

/// Told of every request an ObjectStore sends, once its answer (or failure) is in: what the
/// metrics of the store are made of. `operation` is one of "put", "get", "head", "delete",
/// "list", "probe", "multipart_create", "multipart_part", "multipart_complete",
/// "multipart_abort". Called on the requesting thread: must be thread-safe and not block.
class RequestObserver {
 public:
  RequestObserver() = default;
  RequestObserver(const RequestObserver&) = delete;
  RequestObserver& operator=(const RequestObserver&) = delete;
  virtual ~RequestObserver() = default;
  virtual void object_request(std::string_view operation, std::chrono::nanoseconds took,
                              RequestFailure failure) = 0;
};

/// How bucket names reach the store: in the path (`https://endpoint/BUCKET/KEY`, every store)
/// or in the host name (`https://BUCKET.endpoint/KEY`, AWS's default).
enum class Addressing { path, virtual_host };

/// Where the objects live and how to sign for them. `secret_access_key` and `session_token`
/// are secrets: never logged, never shown.
struct S3Config {
  std::string endpoint;  ///< scheme, host and optional port: "https://s3.eu-west-1.amazonaws.com"
  std::string region = "us-east-1";
  Addressing addressing = Addressing::path;
  std::string bucket;
  std::string prefix;  ///< key prefix inside the bucket, without leading or trailing '/'; may be ""
  std::string access_key_id;
  std::string secret_access_key;
  std::string session_token;  ///< temporary credentials' token (AWS_SESSION_TOKEN); "" for none

  /// put_file() uploads a file larger than this in parts (a multipart upload).
  std::uint64_t multipart_threshold = std::uint64_t{64} << 20U;
  /// The size of each part but the last (raised to S3's 5 MiB minimum, and so that a file
  /// needs at most 10000 parts).
  std::uint64_t part_size = std::uint64_t{16} << 20U;
  /// Deadline for resolving, connecting and the TLS handshake.
  std::chrono::milliseconds connect_timeout{5000};
  /// Deadline for each read and each write of a request: a store that stops answering fails
  /// the call as unavailable after this long.
  std::chrono::milliseconds io_timeout{30000};
  /// Keys asked for per ListObjectsV2 page (max-keys, 1 to 1000).
  unsigned list_page_size = 1000;
  /// Told of every request (metrics); null: none.
  std::shared_ptr<RequestObserver> observer;
};

/// S3's smallest part of a multipart upload (all but the last).
inline constexpr std::uint64_t kMinPartSize = std::uint64_t{5} << 20U;

/// An object found by head() or list(). `key` is relative to the configured prefix.
struct ObjectInfo {
  std::string key;
  std::uint64_t size = 0;
  std::time_t modified = 0;
};

class ObjectStore {
 public:
  virtual ~ObjectStore() = default;

  /// Uploads the file at `path` as `key` with this Content-Type: one PUT up to the multipart
  /// threshold, a multipart upload above it (parts read from the file one at a time, never the
  /// whole file in memory; an upload that fails is aborted). The object is complete and
  /// visible when this returns ok, and not visible at all otherwise.
  [[nodiscard]] virtual Status put_file(std::string_view key, const std::filesystem::path& path,
                                        std::string_view content_type) = 0;
  /// Small bytes (METADATA, a marker) as an object.
  [[nodiscard]] virtual Status put_bytes(std::string_view key, std::string_view bytes,
                                         std::string_view content_type) = 0;
  /// Size and modification time of an object; nullopt when there is none.
  [[nodiscard]] virtual Result<std::optional<ObjectInfo>> head(std::string_view key) = 0;
  /// Bytes [offset, offset + length) of an object (to its end without a length), handed to
  /// `sink` in chunks as they arrive; a failing sink stops the transfer with its error.
  /// not_found when there is no such object, range_not_satisfiable past its end.
  [[nodiscard]] virtual Status get(std::string_view key, std::uint64_t offset,
                                   std::optional<std::uint64_t> length,
                                   const std::function<Status(std::string_view)>& sink) = 0;
  /// Whether the store answers for the bucket (one HEAD of the bucket): ok, or unavailable
  /// with a message that starts "S3 bucket BUCKET at endpoint ENDPOINT" and says why (no
  /// answer, a 5xx, no such bucket, credentials refused). Blocks on the network.
  [[nodiscard]] virtual Status probe() = 0;
  /// Deletes an object; deleting an absent one is ok.
  [[nodiscard]] virtual Status remove(std::string_view key) = 0;
  /// Every object whose key starts with `prefix` (relative to the configured prefix), in key
  /// order, following the listing's pages.
  [[nodiscard]] virtual Result<std::vector<ObjectInfo>> list(std::string_view prefix) = 0;
  /// A presigned GET URL for `key`, valid for `expires` from `now` (at most 7 days), asking
  /// the store to answer with this Content-Type and Content-Disposition when they are not
  /// empty. Pure computation, no I/O: safe on the network thread. A URL signed for the same
  /// answer at most `expires` / 5 (and at most 60 s) before `now` may be returned again, so
  /// the URL is valid for at least four fifths of `expires` from `now`.
  [[nodiscard]] virtual std::string presign_get(std::string_view key, std::chrono::seconds expires,
                                                std::string_view content_type,
                                                std::string_view content_disposition,
                                                std::time_t now) const = 0;
  /// "s3://BUCKET/PREFIX at ENDPOINT", for messages and logs.
  [[nodiscard]] virtual std::string describe() const = 0;
};

/// Completes `config`'s credentials as docs/storage.md ("Credentials") says: an access key id
/// already set (the `[s3] access_key_id` key) takes its secret from `secret_access_key_file`
/// (the file's first line) or, without a file, from AWS_SECRET_ACCESS_KEY; no access key id
/// takes all three from the environment: AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and
/// AWS_SESSION_TOKEN (optional). invalid naming what is missing (never a secret's value).
[[nodiscard]] Status load_s3_credentials(S3Config& config,
                                         const std::filesystem::path& secret_access_key_file);

/// A client for the store `config` describes. Checks the configuration only (no request):
/// invalid for a malformed endpoint, an empty bucket or missing credentials.
[[nodiscard]] Result<std::unique_ptr<ObjectStore>> open_s3_store(S3Config config);

}  // namespace wf::store
