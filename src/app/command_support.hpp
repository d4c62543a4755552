#pragma once
// Internal to the app module: what the commands (commands.cpp, serve.cpp, build_command.cpp)
// share.

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>

#include "wheelforge/app/app.hpp"
#include "wheelforge/catalog/catalog.hpp"
#include "wheelforge/ingest/ingestor.hpp"
#include "wheelforge/store/blob_store.hpp"
#include "wheelforge/util/result.hpp"

namespace wf::app::detail {

/// What signs the provenance of the build runner's wheels (build_signer.cpp): [attestations]
/// signing_key and signing_certificate, else DATA_DIR/keys/build-provenance-key.pem and
/// build-provenance-certificate.pem, made when missing (the key mode 0600, the certificate
/// self-signed for ten years with `url` as its subject alternative name). An error names the
/// file and what is wrong with it.
[[nodiscard]] Result<std::shared_ptr<const auth::BuildSigner>> open_build_signer(
    const Configuration& configuration, std::string_view url);

/// Prints an error the way every command does and returns the exit status to use.
int report(const Error& error, int exit_status);

/// "1 byte", "2048 bytes": a size as the commands print it.
[[nodiscard]] inline std::string format_bytes(std::uint64_t bytes) {
  return std::to_string(bytes) + (bytes == 1 ? " byte" : " bytes");
}

struct DataDir {
  std::unique_ptr<catalog::Catalog> catalog;
  std::unique_ptr<store::BlobStore> store;
};

/// Who is told of every catalog call and object-store request (the server's metrics); null:
/// nobody (the commands).
struct StoreObservers {
  std::shared_ptr<catalog::CallObserver> catalog;
  std::shared_ptr<store::RequestObserver> objects;
};

/// The data directory's catalog and blob store, the directory made when missing; their calls
/// reported to `observers`.
[[nodiscard]] Result<DataDir> open_data_dir(const Settings& settings,
                                            const StoreObservers& observers = {});
/// How the blob store of `settings` opens: the file backend, or the [s3] table's object store
/// client (no request made yet, its requests reported to `observer`) with the read cache's
/// bound.
[[nodiscard]] Result<store::BlobStoreOptions> blob_store_options(
    const Settings& settings, std::shared_ptr<store::RequestObserver> observer = nullptr);

/// Reads the S3 credentials of the [s3] table (or the environment) into `settings`, for a
/// command whose object store is not the configured blob store (`migrate --to-blob-store`);
/// Errc::invalid saying what is missing.
[[nodiscard]] Status resolve_s3_credentials_for(Settings& settings);

/// Who a local command acts as in the audit trail: "cli", from "local:<user>".
[[nodiscard]] catalog::Actor local_actor();

/// A wheel or an sdist, by its file name.
[[nodiscard]] bool is_distribution(const std::filesystem::path& p);

/// What the ingest path accepts: the upload size limit and the archive policy.
[[nodiscard]] ingest::Limits ingest_limits(const Settings& settings);

/// Makes sure lines logged so far are on stderr before the process tells the outside world
/// something (the "listening on" line, its end). serve.cpp, with the log's output.
void flush_logs();

}  // namespace wf::app::detail
