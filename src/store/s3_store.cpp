// ObjectStore over the S3 API: requests signed with Signature V4 (s3_sigv4), sent by the
// blocking Beast client (s3_http), answers read with the minimal XML reader (s3_xml).
// docs/storage.md, "Object store (S3)", describes the behaviour.

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <mutex>
#include <unordered_map>
#include <utility>

#include "store/s3_http.hpp"
#include "store/s3_sigv4.hpp"
#include "store/s3_xml.hpp"
#include "wheelforge/crypto/digest.hpp"
#include "wheelforge/store/object_store.hpp"
#include "wheelforge/util/log.hpp"
#include "wheelforge/util/strings.hpp"
#include "wheelforge/util/url.hpp"

namespace wf::store {

namespace {

using sigv4::Pair;

constexpr std::size_t kMaxErrorBody = 64 * 1024;       // an error answer kept for its message
constexpr std::size_t kMaxListBody = 8 * 1024 * 1024;  // one ListObjectsV2 page
constexpr std::uint64_t kMaxParts = 10000;
constexpr long kMaxPresignSeconds = 604800;      // 7 days: S3's (and Swift's) limit
constexpr long kMaxPresignReuseSeconds = 60;     // a presigned URL is given again for this long
constexpr std::size_t kMaxPresignedKept = 8192;  // presigned URLs kept for reuse

/// The operation a request is, for the metrics (RequestObserver).
std::string_view operation_of(std::string_view method, const std::vector<Pair>& query,
                              std::string_view path, std::string_view bucket_path) {
  const auto has = [&](std::string_view name) {
    return std::any_of(query.begin(), query.end(), [&](const Pair& p) { return p.first == name; });
  };
  if (method == "PUT") return has("partNumber") ? "multipart_part" : "put";
  if (method == "POST") return has("uploads") ? "multipart_create" : "multipart_complete";
  if (method == "DELETE") return has("uploadId") ? "multipart_abort" : "delete";
  if (method == "HEAD") return path == bucket_path ? "probe" : "head";
  return has("list-type") ? "list" : "get";
}

RequestFailure failure_of(const Result<s3http::Response>& response) {
  if (!response) {
    return response.error().code == Errc::unavailable ? RequestFailure::unreachable
                                                      : RequestFailure::none;  // our side
  }
  const unsigned status = response->status;
  if (status / 100 == 2 || status == 404 || status == 416) return RequestFailure::none;
  if (status / 100 == 5) return RequestFailure::server_error;
  if (status == 403) return RequestFailure::denied;
  return RequestFailure::rejected;
}

class S3Store final : public ObjectStore {
 public:
  S3Store(S3Config config, Url endpoint)
      : config_(std::move(config)),
        endpoint_(std::move(endpoint)),
        // Virtual-hosted: the connection, SNI and the certificate check use the bucket's host.
        client_(s3http::Endpoint{endpoint_.https(),
                                 config_.addressing == Addressing::virtual_host
                                     ? config_.bucket + "." + endpoint_.host
                                     : endpoint_.host,
                                 endpoint_.port},
                s3http::Timeouts{config_.connect_timeout, config_.io_timeout}) {
    credentials_ = {config_.access_key_id, config_.secret_access_key, config_.session_token};
    host_ = endpoint_.authority();
    if (config_.addressing == Addressing::virtual_host) host_ = config_.bucket + "." + host_;
    bucket_name_ = "S3 bucket " + config_.bucket + " at endpoint " + endpoint_.scheme + "://" +
                   endpoint_.authority();
    description_ = "s3://" + config_.bucket + (config_.prefix.empty() ? "" : "/") + config_.prefix +
                   " at " + endpoint_.scheme + "://" + endpoint_.authority();
  }

  [[nodiscard]] Status ready() const { return client_.ready(); }

  Status put_file(std::string_view key, const std::filesystem::path& path,
                  std::string_view content_type) override {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) {
      return make_error(Errc::io, "cannot stat " + path.string() + ": " + std::strerror(errno));
    }
    const auto size = static_cast<std::uint64_t>(st.st_size);
    if (size > config_.multipart_threshold) return put_multipart(key, path, size, content_type);
    s3http::Body body;
    body.file = &path;
    body.length = size;
    auto r = send("PUT", key, {}, {{"content-type", std::string(content_type)}}, body,
                  std::string(sigv4::kUnsignedPayload), nullptr);
    if (!r) return r.error();
    return ok_status();
  }

  Status put_bytes(std::string_view key, std::string_view bytes,
                   std::string_view content_type) override {
    s3http::Body body;
    body.bytes = bytes;
    auto r = send("PUT", key, {}, {{"content-type", std::string(content_type)}}, body,
                  crypto::sha256_hex(bytes), nullptr);
    if (!r) return r.error();
    return ok_status();
  }

  Result<std::optional<ObjectInfo>> head(std::string_view key) override {
    auto r = send("HEAD", key, {}, {}, {}, std::string(sigv4::kEmptyPayloadHash), nullptr);
    if (!r) {
      if (r.error().code == Errc::not_found) return std::optional<ObjectInfo>{};
      return r.error();
    }
    ObjectInfo info;
    info.key = std::string(key);
    const auto size = parse_u64(r->header("content-length"));
    if (!size) return make_error(Errc::internal, where("HEAD", key) + ": no Content-Length");
    info.size = *size;
    info.modified = xml::parse_time(r->header("last-modified"));
    return std::optional<ObjectInfo>(std::move(info));
  }

  Status get(std::string_view key, std::uint64_t offset, std::optional<std::uint64_t> length,
             const std::function<Status(std::string_view)>& sink) override {
    if (length && *length == 0) {
      // No bytes to ask for: whether the object is there and the offset inside it.
      auto found = head(key);
      if (!found) return found.error();
      if (!*found) return make_error(Errc::not_found, where("GET", key) + ": no such object");
      if (offset > (*found)->size) {
        return make_error(Errc::range_not_satisfiable,
                          where("GET", key) + ": offset past the object's end");
      }
      return ok_status();
    }
    std::vector<Pair> headers;
    if (offset > 0 || length) {
      std::string range = "bytes=" + std::to_string(offset) + "-";
      if (length) range += std::to_string(offset + *length - 1);
      headers.emplace_back("range", range);
    }
    auto r = send("GET", key, {}, headers, {}, std::string(sigv4::kEmptyPayloadHash), &sink);
    if (!r) return r.error();
    if (!headers.empty() && r->status != 206) {
      return make_error(Errc::internal, where("GET", key) + ": the store ignored the Range");
    }
    return ok_status();
  }

  Status probe() override {
    auto r = request("HEAD", bucket_path(), {}, {}, {}, std::string(sigv4::kEmptyPayloadHash),
                     nullptr, kMaxErrorBody, "HEAD bucket");
    if (r) return ok_status();
    const Error& e = r.error();
    std::string why = e.message;
    // request() names the store first: keep what follows it.
    if (const auto at = why.find(": HEAD bucket: "); at != std::string::npos) {
      why = why.substr(at + 15);
    }
    if (e.code == Errc::not_found) why = "no such bucket (" + why + ")";
    return make_error(Errc::unavailable, bucket_name_ + " is unreachable: " + why);
  }

  Status remove(std::string_view key) override {
    auto r = send("DELETE", key, {}, {}, {}, std::string(sigv4::kEmptyPayloadHash), nullptr);
    if (!r && r.error().code != Errc::not_found) return r.error();
    return ok_status();
  }

  Result<std::vector<ObjectInfo>> list(std::string_view prefix) override {
    const std::string full = full_key(prefix);
    const std::size_t strip = config_.prefix.empty() ? 0 : config_.prefix.size() + 1;
    std::vector<ObjectInfo> out;
    std::string token;
    for (;;) {
      std::vector<Pair> query{{"list-type", "2"},
                              {"max-keys", std::to_string(config_.list_page_size)},
                              {"prefix", full}};
      if (!token.empty()) query.emplace_back("continuation-token", token);
      auto r = request("GET", bucket_path(), query, {}, {}, std::string(sigv4::kEmptyPayloadHash),
                       nullptr, kMaxListBody, "LIST " + full);
      if (!r) return r.error();
      for (const auto contents : xml::elements(r->body, "Contents")) {
        const auto key = xml::text(contents, "Key");
        const auto size = parse_u64(xml::text(contents, "Size").value_or(""));
        if (!key || !size || key->size() < strip) {
          return make_error(Errc::internal, describe() + ": a listing entry without a key or size");
        }
        out.push_back({key->substr(strip), *size,
                       xml::parse_time(xml::text(contents, "LastModified").value_or(""))});
      }
      if (xml::text(r->body, "IsTruncated").value_or("false") != "true") break;
      token = xml::text(r->body, "NextContinuationToken").value_or("");
      if (token.empty()) {
        return make_error(Errc::internal, describe() + ": a truncated listing without a token");
      }
    }
    std::sort(out.begin(), out.end(),
              [](const ObjectInfo& a, const ObjectInfo& b) { return a.key < b.key; });
    return out;
  }

  std::string presign_get(std::string_view key, std::chrono::seconds expires,
                          std::string_view content_type, std::string_view content_disposition,
                          std::time_t now) const override {
    sigv4::Request r;
    r.method = "GET";
    r.host = host_;
    r.path = object_path(key);
    if (!content_disposition.empty()) {
      r.query.emplace_back("response-content-disposition", std::string(content_disposition));
    }
    if (!content_type.empty()) {
      r.query.emplace_back("response-content-type", std::string(content_type));
    }
    const long seconds =
        std::clamp<long>(static_cast<long>(expires.count()), 1, kMaxPresignSeconds);
    // Signing (five HMACs and a digest) costs more than the rest of a redirect: a URL signed
    // a moment ago for the same answer is given again while most of its validity is left.
    const long reuse = std::min<long>(seconds / 5, kMaxPresignReuseSeconds);
    std::string id;
    id.reserve(key.size() + content_type.size() + content_disposition.size() + 24);
    id.append(key).append(1, '\n').append(content_type).append(1, '\n');
    id.append(content_disposition).append(1, '\n').append(std::to_string(seconds));
    if (reuse > 0) {
      std::lock_guard lock(presigned_mu_);
      if (const auto it = presigned_.find(id);
          it != presigned_.end() && now >= it->second.at && now - it->second.at < reuse) {
        return it->second.url;
      }
    }
    std::string url =
        sigv4::presign(endpoint_.scheme, r, credentials_, config_.region, now, seconds).url;
    if (reuse > 0) {
      std::lock_guard lock(presigned_mu_);
      if (presigned_.size() >= kMaxPresignedKept) presigned_.clear();
      presigned_.insert_or_assign(std::move(id), Presigned{url, now});
    }
    return url;
  }

  std::string describe() const override { return description_; }

 private:
  std::string full_key(std::string_view key) const {
    if (config_.prefix.empty()) return std::string(key);
    return config_.prefix + "/" + std::string(key);
  }
  std::string bucket_path() const {
    return config_.addressing == Addressing::virtual_host ? "/" : "/" + config_.bucket;
  }
  std::string object_path(std::string_view key) const {
    const std::string k = full_key(key);
    return config_.addressing == Addressing::virtual_host ? "/" + k
                                                          : "/" + config_.bucket + "/" + k;
  }
  std::string where(std::string_view method, std::string_view key) const {
    return describe() + ": " + std::string(method) + " " + full_key(key);
  }

  /// A request on an object.
  Result<s3http::Response> send(std::string_view method, std::string_view key,
                                std::vector<Pair> query, std::vector<Pair> headers,
                                const s3http::Body& body, std::string payload_hash,
                                const s3http::Sink* sink) {
    return request(method, object_path(key), std::move(query), std::move(headers), body,
                   std::move(payload_hash), sink, kMaxErrorBody,
                   std::string(method) + " " + full_key(key));
  }

  /// Signs and sends a request; maps a failed exchange or a non-2xx answer to the error the
  /// interface promises, naming the store and `what` (never a credential).
  Result<s3http::Response> request(std::string_view method, std::string path,
                                   std::vector<Pair> query, std::vector<Pair> headers,
                                   const s3http::Body& body, std::string payload_hash,
                                   const s3http::Sink* sink, std::size_t max_body,
                                   const std::string& what) {
    sigv4::Request r;
    r.method = std::string(method);
    r.host = host_;
    r.path = std::move(path);
    r.query = std::move(query);
    r.headers = std::move(headers);
    r.payload_hash = std::move(payload_hash);
    const auto signed_request = sigv4::sign(r, credentials_, config_.region, std::time(nullptr));
    const auto started = std::chrono::steady_clock::now();
    auto response =
        client_.exchange(method, sigv4::target(r), signed_request.headers, body, sink, max_body);
    if (config_.observer) {
      config_.observer->object_request(operation_of(method, r.query, r.path, bucket_path()),
                                       std::chrono::steady_clock::now() - started,
                                       failure_of(response));
    }
    if (!response) {
      const auto& e = response.error();
      if (e.code == Errc::unavailable) {
        return make_error(Errc::unavailable, describe() + ": " + what + ": " + e.message);
      }
      return e;  // a sink's own error, or a local file's
    }
    const unsigned status = response->status;
    if (status / 100 == 2) return response;
    std::string detail = "HTTP " + std::to_string(status);
    if (auto code = xml::text(response->body, "Code")) detail += " " + *code;
    if (auto message = xml::text(response->body, "Message")) {
      detail += ": " + sanitize_for_log(*message);
    }
    const std::string message = describe() + ": " + what + ": " + detail;
    if (status == 403) return make_error(Errc::forbidden, message);
    if (status == 404) return make_error(Errc::not_found, message);
    if (status == 416) return make_error(Errc::range_not_satisfiable, message);
    if (status / 100 == 5) return make_error(Errc::unavailable, message);
    return make_error(Errc::internal, message);
  }

  Status put_multipart(std::string_view key, const std::filesystem::path& path, std::uint64_t size,
                       std::string_view content_type) {
    std::uint64_t part = std::max(config_.part_size, kMinPartSize);
    part = std::max(part, (size + kMaxParts - 1) / kMaxParts);
    auto started =
        send("POST", key, {{"uploads", ""}}, {{"content-type", std::string(content_type)}}, {},
             std::string(sigv4::kEmptyPayloadHash), nullptr);
    if (!started) return started.error();
    const auto upload_id = xml::text(started->body, "UploadId");
    if (!upload_id || upload_id->empty()) {
      return make_error(Errc::internal, where("POST", key) + ": no UploadId in the answer");
    }
    auto done = upload_parts(key, path, size, part, *upload_id);
    if (!done) {
      auto aborted = send("DELETE", key, {{"uploadId", *upload_id}}, {}, {},
                          std::string(sigv4::kEmptyPayloadHash), nullptr);
      if (!aborted && aborted.error().code != Errc::not_found) {
        log::warn("{}: cannot abort the failed multipart upload of {}: {}", describe(),
                  full_key(key), aborted.error().message);
      }
    }
    return done;
  }

  Status upload_parts(std::string_view key, const std::filesystem::path& path, std::uint64_t size,
                      std::uint64_t part, const std::string& upload_id) {
    std::string complete = "<CompleteMultipartUpload>";
    std::uint64_t number = 1;
    for (std::uint64_t offset = 0; offset < size; offset += part, ++number) {
      s3http::Body body;
      body.file = &path;
      body.offset = offset;
      body.length = std::min(part, size - offset);
      auto r = send("PUT", key, {{"partNumber", std::to_string(number)}, {"uploadId", upload_id}},
                    {}, body, std::string(sigv4::kUnsignedPayload), nullptr);
      if (!r) return r.error();
      const std::string etag = r->header("etag");
      if (etag.empty()) {
        return make_error(Errc::internal,
                          where("PUT", key) + ": no ETag for part " + std::to_string(number));
      }
      complete += "<Part><PartNumber>" + std::to_string(number) + "</PartNumber><ETag>" +
                  xml::escape(etag) + "</ETag></Part>";
    }
    complete += "</CompleteMultipartUpload>";
    s3http::Body body;
    body.bytes = complete;
    auto r = send("POST", key, {{"uploadId", upload_id}}, {{"content-type", "application/xml"}},
                  body, crypto::sha256_hex(complete), nullptr);
    if (!r) return r.error();
    // S3 may answer 200 and still fail the completion: the error is in the body.
    if (!xml::elements(r->body, "Error").empty()) {
      return make_error(Errc::unavailable,
                        where("POST", key) + ": completing the multipart upload failed: " +
                            xml::text(r->body, "Code").value_or("") + " " +
                            sanitize_for_log(xml::text(r->body, "Message").value_or("")));
    }
    return ok_status();
  }

  struct Presigned {
    std::string url;
    std::time_t at = 0;  ///< when it was signed
  };

  S3Config config_;
  Url endpoint_;
  mutable s3http::Client client_;
  mutable std::mutex presigned_mu_;
  mutable std::unordered_map<std::string, Presigned> presigned_;  ///< by key and answer
  sigv4::Credentials credentials_;
  std::string host_;  // the Host header: the endpoint's authority, the bucket before it (virtual)
  std::string description_;
  std::string bucket_name_;  // "S3 bucket B at endpoint E", for probe()
};

}  // namespace

std::string_view request_failure_name(RequestFailure failure) {
  switch (failure) {
    case RequestFailure::none:
      return "none";
    case RequestFailure::unreachable:
      return "unreachable";
    case RequestFailure::server_error:
      return "server_error";
    case RequestFailure::denied:
      return "denied";
    case RequestFailure::rejected:
      return "rejected";
  }
  return "none";
}

Result<std::unique_ptr<ObjectStore>> open_s3_store(S3Config config) {
  Problems problems;
  auto url = parse_url(config.endpoint);
  if (!url) {
    problems.add("the S3 endpoint is not an http:// or https:// URL: " + url.error().message);
  } else if (!url->userinfo.empty() || url->query || (url->path != "/" && !url->path.empty())) {
    problems.add("the S3 endpoint must be scheme, host and port only (no path, query or user)");
  }
  if (config.bucket.empty()) problems.add("the S3 bucket is empty");
  if (config.region.empty()) problems.add("the S3 region is empty");
  if (config.access_key_id.empty() || config.secret_access_key.empty()) {
    problems.add("S3 credentials are missing (an access key id and a secret access key)");
  }
  if (!config.prefix.empty() && (config.prefix.front() == '/' || config.prefix.back() == '/')) {
    problems.add("the S3 key prefix must not start or end with '/'");
  }
  if (config.list_page_size == 0 || config.list_page_size > 1000) {
    problems.add("the S3 listing page size must be 1 to 1000");
  }
  if (!problems.empty()) return problems.to_error();
  auto store = std::make_unique<S3Store>(std::move(config), std::move(url.value()));
  if (auto ready = store->ready(); !ready) return ready.error();
  return std::unique_ptr<ObjectStore>(std::move(store));
}

}  // namespace wf::store
