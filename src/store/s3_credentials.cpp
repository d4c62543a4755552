// Where the S3 client's credentials come from: the configuration, a secret file, or the
// environment variables every AWS tool reads.

#include <cstdlib>
#include <fstream>
#include <string>

#include "wheelforge/store/object_store.hpp"
#include "wheelforge/util/strings.hpp"

namespace wf::store {

namespace {

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr ? std::string(v) : std::string();
}

}  // namespace

Status load_s3_credentials(S3Config& config, const std::filesystem::path& secret_access_key_file) {
  if (config.access_key_id.empty()) {
    if (!secret_access_key_file.empty()) {
      return make_error(Errc::invalid,
                        "an S3 secret_access_key_file needs its access_key_id in [s3]");
    }
    config.access_key_id = env("AWS_ACCESS_KEY_ID");
    config.secret_access_key = env("AWS_SECRET_ACCESS_KEY");
    config.session_token = env("AWS_SESSION_TOKEN");
    if (config.access_key_id.empty() || config.secret_access_key.empty()) {
      return make_error(Errc::invalid,
                        "no S3 credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or "
                        "[s3] access_key_id and secret_access_key_file");
    }
    return ok_status();
  }
  if (secret_access_key_file.empty()) {
    config.secret_access_key = env("AWS_SECRET_ACCESS_KEY");
    if (config.secret_access_key.empty()) {
      return make_error(Errc::invalid,
                        "[s3] access_key_id is set but neither secret_access_key_file nor "
                        "AWS_SECRET_ACCESS_KEY gives its secret");
    }
    return ok_status();
  }
  std::ifstream in(secret_access_key_file);
  std::string line;
  if (!in || !std::getline(in, line)) {
    return make_error(Errc::invalid, "cannot read the S3 secret_access_key_file " +
                                         secret_access_key_file.string());
  }
  config.secret_access_key = std::string(trim(line));
  if (config.secret_access_key.empty()) {
    return make_error(Errc::invalid, "the S3 secret_access_key_file " +
                                         secret_access_key_file.string() + " is empty");
  }
  return ok_status();
}

}  // namespace wf::store
