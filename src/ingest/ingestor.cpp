#include "wheelforge/ingest/ingestor.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <ctime>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <variant>
#include <vector>

#include "wheelforge/archive/elf.hpp"
#include "wheelforge/archive/reader.hpp"
#include "wheelforge/auth/attestation.hpp"
#include "wheelforge/core/binding.hpp"
#include "wheelforge/core/filename.hpp"
#include "wheelforge/core/metadata.hpp"
#include "wheelforge/core/name.hpp"
#include "wheelforge/core/version.hpp"
#include "wheelforge/core/wheel_variant.hpp"
#include "wheelforge/crypto/digest.hpp"
#include "wheelforge/render/variants.hpp"
#include "wheelforge/util/strings.hpp"

namespace wf::ingest {

namespace {

constexpr std::size_t kNameInMessage = 300;

std::string name_for_message(std::string_view filename) {
  return sanitize_for_log(filename, kNameInMessage);
}

bool is_sdist_name(std::string_view filename) {
  const auto parsed = core::parse_dist_filename(filename);
  return parsed && parsed->kind == core::DistKind::sdist;
}

}  // namespace

std::string already_exists_message(std::string_view filename, const core::FileRecord& existing) {
  const std::string name = name_for_message(filename);
  if (existing.filename == filename) {
    return "File already exists: " + name +
           " is stored with different content; files are immutable, upload a new version or "
           "build tag instead";
  }
  if (existing.kind == core::DistKind::sdist) {
    return "File already exists: " + name + ": only one sdist per release, and " +
           existing.project + " " + existing.version + " has " +
           name_for_message(existing.filename) + " already; upload a new version instead";
  }
  return "File already exists: " + name + " is the same file name as the stored " +
         name_for_message(existing.filename) +
         " (project, version and tags compared after normalization), with different content; "
         "files are immutable, upload a new version or build tag instead";
}

std::string reserved_message(std::string_view filename, const catalog::DeletedFile& deleted) {
  const std::string name = name_for_message(filename);
  if (deleted.filename == filename) {
    return "File already exists: " + name +
           " was deleted and its name stays reserved; upload a new version or build tag instead";
  }
  if (is_sdist_name(deleted.filename)) {
    return "File already exists: " + name + ": only one sdist per release, and this release's " +
           name_for_message(deleted.filename) +
           " was deleted; its name stays reserved, upload a new version instead";
  }
  return "File already exists: " + name + " is the same file name as the deleted " +
         name_for_message(deleted.filename) +
         " (project, version and tags compared after normalization), whose name stays "
         "reserved; upload a new version or build tag instead";
}

namespace {

struct Validated {
  core::DistFilename name;
  core::CoreMetadata metadata;
  std::string metadata_bytes;
  core::VariantHints hints;
  std::optional<core::WheelFindings> binaries;  ///< wheels only
  std::optional<core::WheelVariant> variant;    ///< PEP 825 variant wheels only
};

// A variant wheel (a variant label in its file name) must carry a variant.json that defines
// its label (docs/variants.md, "What ingest checks"); a wheel without a label is not a variant
// wheel, whatever files it holds.
Result<std::optional<core::WheelVariant>> read_variant(const core::DistFilename& name,
                                                       const archive::WheelContents& contents) {
  if (!name.tags.variant_label) return std::optional<core::WheelVariant>();
  if (!contents.variant_json) {
    return make_error(Errc::invalid, "variant wheel (variant label '" + *name.tags.variant_label +
                                         "') has no " + contents.dist_info_dir +
                                         "/variant.json (PEP 825)");
  }
  auto variant = render::parse_variant_json(*contents.variant_json, *name.tags.variant_label);
  if (!variant) {
    return make_error(Errc::invalid, contents.dist_info_dir + "/" + variant.error().message);
  }
  return std::optional<core::WheelVariant>(std::move(*variant));
}

// Reads what the wheel's ELF members say (streaming, nothing extracted) and checks its label
// against it: a label the binaries contradict (`+cu128` on a binary linking libcudart.so.13)
// would install a build that cannot load.
Result<core::WheelFindings> inspect_binaries(const std::filesystem::path& file, const Validated& v,
                                             const Limits& limits) {
  archive::InspectLimits ilimits;
  ilimits.max_members = limits.max_archive_members;
  ilimits.max_inflated_bytes = limits.max_inflated_size;
  auto binaries = archive::inspect_wheel_binaries(file, ilimits);
  if (!binaries) {
    return make_error(binaries.error().code,
                      "reading the wheel's binaries: " + binaries.error().message);
  }
  core::WheelFindings findings = core::find_wheel(*binaries, v.hints, v.metadata.requires_dist);
  if (v.variant) {
    if (auto st = core::check_variant_against_binaries(*v.variant, findings); !st) {
      return st.error();
    }
  }
  if (auto st = core::check_label_against_binaries(v.hints, v.name.version.local_str(), findings);
      !st) {
    return st.error();
  }
  return findings;
}

// Everything that can be checked without touching the store or the catalog. Collects every
// problem so that an uploader sees all of them at once.
Result<Validated> validate(const std::filesystem::path& file, std::string_view filename,
                           const Limits& limits) {
  auto parsed = core::parse_dist_filename(filename);
  if (!parsed) return parsed.error();
  Validated v{std::move(*parsed), {}, {}, {}, {}, {}};

  archive::Limits alimits;
  alimits.max_metadata_bytes = limits.max_metadata_size;
  alimits.max_members = limits.max_archive_members;
  alimits.max_inflated_bytes = limits.max_inflated_size;
  alimits.max_compression_ratio = limits.max_compression_ratio;
  const char* metadata_name = "METADATA";
  if (v.name.kind == core::DistKind::wheel) {
    auto contents = archive::read_wheel(file, v.name.normalized_name, v.name.version_text, alimits);
    if (!contents) return contents.error();
    if (auto wheel = core::parse_wheel_file(contents->wheel); !wheel) {
      return make_error(Errc::invalid,
                        contents->dist_info_dir + "/WHEEL: " + wheel.error().message);
    }
    auto variant = read_variant(v.name, *contents);
    if (!variant) return variant.error();
    v.variant = std::move(*variant);
    v.metadata_bytes = std::move(contents->metadata);
  } else {
    metadata_name = "PKG-INFO";
    auto pkg_info = archive::read_sdist_pkg_info(file, alimits);
    if (!pkg_info) return pkg_info.error();
    v.metadata_bytes = std::move(*pkg_info);
  }

  auto metadata = core::parse_core_metadata(v.metadata_bytes);
  if (!metadata) {
    return make_error(Errc::invalid, std::string(metadata_name) + ": " + metadata.error().message);
  }
  v.metadata = std::move(*metadata);

  Problems problems;
  if (core::normalize_name(v.metadata.name) != v.name.normalized_name) {
    problems.add(std::string(metadata_name) + " Name '" + sanitize_for_log(v.metadata.name) +
                 "' does not match the file name's project '" + v.name.normalized_name + "'");
  }
  auto meta_version = core::Version::parse(v.metadata.version);
  if (!meta_version) {
    problems.add(std::string(metadata_name) +
                 " Version is invalid: " + meta_version.error().message);
  } else if (meta_version->str() != v.name.version.str()) {
    // pip refuses such wheels ("inconsistent version": docs/clients.md, "pip"); a label added
    // to the file name only must also be written into METADATA.
    problems.add(std::string(metadata_name) + " Version '" + sanitize_for_log(v.metadata.version) +
                 "' does not match the file name's version '" + v.name.version.str() + "'");
  }
  if (!problems.empty()) return problems.to_error();

  // The torch/CUDA/ABI a wheel was built for; a label that contradicts the wheel's own torch
  // pin is refused, since one of the two is wrong and pip would install it for the wrong torch.
  auto hints = core::hints_for_distribution(v.name.normalized_name, v.name.version.public_str(),
                                            v.name.version.local_str(), v.metadata.requires_dist);
  if (!hints) return hints.error();
  v.hints = std::move(*hints);
  if (v.variant) {
    auto with =
        core::hints_with_variant(std::move(v.hints), v.name.version.local_str(), *v.variant);
    if (!with) return with.error();
    v.hints = std::move(*with);
  }
  if (v.name.kind == core::DistKind::wheel) {
    auto binaries = inspect_binaries(file, v, limits);
    if (!binaries) return binaries.error();
    v.binaries = std::move(*binaries);
  }
  return v;
}

// A checked file, ready to be published and recorded.
struct Prepared {
  catalog::NewFile nf;
  store::TempFile temp;
  std::string metadata;    ///< METADATA / PKG-INFO bytes, stored as their own blob
  std::string provenance;  ///< the PEP 740 provenance object, a blob of its own; "" for none
  bool restore = false;    ///< the same bytes as a damaged file: publish them again, no new row
};

// Everything before the catalog write: size limit, digest, name checks and validation. An
// identical file that is already stored is answered here (an Ingested), before the archive is
// read: cheap, and the answer does not depend on the content being valid.
using Prepare = std::variant<Ingested, Prepared>;

// The provenance object of the file `name` with digest `sha256`: signed by this server (its own
// build), or from the attestations that came with it: Errc::invalid when they do not verify, or
// when no trust roots are configured.
Result<std::string> provenance_of(const Attestations& a, std::string_view name,
                                  const std::string& sha256) {
  if (a.sign) {
    auto signed_provenance = a.sign(name, sha256);
    if (!signed_provenance) {
      return make_error(signed_provenance.error().code,
                        "provenance: " + signed_provenance.error().message);
    }
    return signed_provenance;
  }
  if (a.roots == nullptr) {
    return make_error(Errc::invalid,
                      "attestations: this index verifies attestations against the certificates of "
                      "[attestations] trust_roots, and none are configured");
  }
  auth::AttestationCheck check;
  check.filename = std::string(name);
  check.sha256 = sha256;
  check.now = static_cast<std::int64_t>(std::time(nullptr));
  check.publisher = a.publisher ? &*a.publisher : nullptr;
  check.publisher_issuer_url = a.publisher_issuer_url;
  auto verified = auth::verify_attestations(a.json, *a.roots, check);
  if (!verified) {
    return make_error(Errc::invalid, "attestations refused: " + verified.error().message);
  }
  return render::render_provenance(verified->publisher, verified->attestations);
}

Result<Prepare> prepare(catalog::Catalog& catalog, store::TempFile temp, std::string_view filename,
                        const core::Uploader& uploader, const catalog::Actor& actor,
                        const Limits& limits, store::Sync sync,
                        const Attestations* attestations = nullptr) {
  if (temp.size() > limits.max_file_size) {
    return make_error(Errc::too_large, "file is larger than the limit of " +
                                           std::to_string(limits.max_file_size) + " bytes");
  }
  if (auto st = temp.finish(sync); !st) return st.error();

  // Checked again inside the catalog's write transaction; checked here too so that a repeated
  // upload is answered without reading the archive.
  auto existing = catalog.find_same_file(filename, temp.sha256());
  if (!existing) return existing.error();
  // Identical bytes under any spelling are the stored file: answered as such, or, when it is
  // damaged, read again (under its stored name, the one its contents agree with) to heal it.
  std::string_view name = filename;
  if (existing->has_value()) {
    if ((*existing)->sha256 != temp.sha256()) {
      return make_error(Errc::conflict, already_exists_message(filename, **existing));
    }
    if (!(*existing)->damaged) return Prepare(Ingested{Outcome::identical, **existing, {}});
    name = (*existing)->filename;
  } else {
    auto reserved = catalog.find_reservation(filename);
    if (!reserved) return reserved.error();
    if (reserved->has_value()) {
      return make_error(Errc::conflict, reserved_message(filename, **reserved));
    }
  }

  auto v = validate(temp.path(), name, limits);
  if (!v) return v.error();
  const bool restore = existing->has_value();
  std::string provenance;
  if (attestations != nullptr && !restore) {
    auto made = provenance_of(*attestations, name, temp.sha256());
    if (!made) return made.error();
    provenance = std::move(*made);
  }
  if (restore && crypto::sha256_hex(v->metadata_bytes) != (*existing)->metadata_sha256) {
    return make_error(Errc::internal, "the METADATA read from " + std::string(name) +
                                          " differs from the one recorded for it");
  }

  catalog::NewFile nf;
  nf.uploader = uploader;
  nf.actor = actor;
  core::FileRecord& f = nf.file;
  f.filename = std::string(name);
  f.project = v->name.normalized_name;
  f.version = v->name.version.str();
  f.kind = v->name.kind;
  f.sha256 = temp.sha256();
  f.size = temp.size();
  f.upload_time = now_micros();
  f.requires_python = v->metadata.requires_python;
  f.metadata_sha256 = crypto::sha256_hex(v->metadata_bytes);
  f.metadata_size = v->metadata_bytes.size();
  if (!provenance.empty()) {
    f.provenance_sha256 = crypto::sha256_hex(provenance);
    f.provenance_size = provenance.size();
  }
  f.tags = v->name.tags;
  f.hints = v->hints;
  f.binaries = std::move(v->binaries);
  f.variant = std::move(v->variant);
  nf.display_name = v->metadata.name;
  nf.requires_dist = v->metadata.requires_dist;
  return Prepare(Prepared{std::move(nf), std::move(temp), std::move(v->metadata_bytes),
                          std::move(provenance), restore});
}

// Local files are published inside the catalog's write transaction, once the name is known to
// be free and before the row is written: a rename, cheap under the write lock. A crash in
// between leaves an orphan blob (harmless, collected by gc), never a row without its file; a
// lost race publishes nothing.
//
// An object store's blobs are uploaded (and verified) before the transaction begins: an upload
// takes round trips to the store, and other writers must not wait for them. The catalog is
// asked first what it would answer (Catalog::precheck), so a file it refuses (or holds
// already) uploads nothing; a file that only the transaction refuses (a race with another
// writer) leaves its objects behind as orphans for gc, which spares objects younger than
// its grace period. They are never withdrawn here: outside the write lock, another upload of
// the same bytes (or of the same METADATA, which the wheels of one release for several
// platforms share) may be recording a row that references them.
enum class Publish {
  in_transaction,  ///< local files: published by the transaction's callback
  ahead,           ///< object store: uploaded before the transaction
};

Publish publish_mode(const store::BlobStore& store) {
  return store.backend() == store::BlobBackend::object_store ? Publish::ahead
                                                             : Publish::in_transaction;
}

Status publish(const store::BlobStore& store, Prepared& p, store::Sync sync,
               Publish mode = Publish::in_transaction) {
  const std::string& metadata_sha256 = p.nf.file.metadata_sha256;
  const std::string& provenance_sha256 = p.nf.file.provenance_sha256;
  const bool had_metadata = mode == Publish::ahead || store.contains(metadata_sha256);
  const bool had_provenance =
      provenance_sha256.empty() || mode == Publish::ahead || store.contains(provenance_sha256);
  if (auto m = store.put(p.metadata, sync); !m) return m.error();
  // Nothing of a refused file stays: a METADATA or provenance blob that is new goes again.
  const auto withdraw_new = [&] {
    if (!had_metadata) (void)store.withdraw(metadata_sha256);
    if (!had_provenance) (void)store.withdraw(provenance_sha256);
  };
  if (!provenance_sha256.empty()) {
    if (auto m = store.put(p.provenance, sync); !m) {
      withdraw_new();
      return m.error();
    }
  }
  if (auto blob = store.commit(std::move(p.temp), sync); !blob) {
    withdraw_new();
    return blob.error();
  }
  return ok_status();
}

Result<Ingested> to_ingested(const catalog::Catalog::Inserted& inserted,
                             const catalog::NewFile& nf) {
  switch (inserted.first) {
    case catalog::InsertOutcome::inserted:
      return Ingested{Outcome::stored, inserted.second, nf.display_name};
    case catalog::InsertOutcome::identical:
      return Ingested{Outcome::identical, inserted.second, nf.display_name};
    case catalog::InsertOutcome::conflict:
      break;
    case catalog::InsertOutcome::forbidden:
      return make_error(Errc::forbidden, core::not_owner_message(nf.file.project));
    case catalog::InsertOutcome::variant_conflict: {
      const core::FileRecord& other = inserted.second;
      if (nf.file.variant && other.variant) {
        if (auto why = core::variant_conflict(*nf.file.variant, *other.variant, other.filename)) {
          return make_error(Errc::conflict, *why);
        }
      }
      return make_error(Errc::conflict, "variant.json contradicts " + other.filename);
    }
    case catalog::InsertOutcome::reserved: {
      const core::FileRecord& deleted = inserted.second;
      return make_error(
          Errc::conflict,
          reserved_message(nf.file.filename, catalog::DeletedFile{deleted.filename, deleted.project,
                                                                  deleted.sha256}));
    }
  }
  return make_error(Errc::conflict, already_exists_message(nf.file.filename, inserted.second));
}

// One file to an object store: the catalog asked first, the blobs uploaded, then the row.
// The part before the row: the answer when the file is settled without one (the catalog
// refuses it or holds it already, or the upload failed), nothing once its blobs are uploaded.
std::optional<Result<Ingested>> upload_ahead(catalog::Catalog& catalog,
                                             const store::BlobStore& store, Prepared& p) {
  auto refusal = catalog.precheck(p.nf);
  if (!refusal) return Result<Ingested>(refusal.error());
  if (refusal->has_value()) return to_ingested(**refusal, p.nf);
  if (auto st = publish(store, p, store::Sync::now, Publish::ahead); !st) {
    return Result<Ingested>(st.error());
  }
  return std::nullopt;
}

Result<Ingested> ingest_ahead(catalog::Catalog& catalog, const store::BlobStore& store,
                              Prepared& p) {
  if (auto settled = upload_ahead(catalog, store, p)) return std::move(*settled);
  auto inserted = catalog.insert_file(p.nf);
  if (!inserted) return inserted.error();
  return to_ingested(*inserted, p.nf);
}

// Heals a damaged file: its blobs published again (with their own syncs), its damage
// records dropped, in one catalog transaction.
Result<Ingested> restore(catalog::Catalog& catalog, const store::BlobStore& store, Prepared& p) {
  auto restored = catalog.restore_file(p.nf.file.filename, p.nf.file.sha256, [&]() -> Status {
    return publish(store, p, store::Sync::now);
  });
  if (!restored) return restored.error();
  return Ingested{Outcome::restored, std::move(*restored), p.nf.display_name};
}

}  // namespace

Result<Ingested> Ingestor::ingest(store::TempFile temp, std::string_view filename,
                                  const core::Uploader& uploader, const catalog::Actor& actor,
                                  const Attestations* attestations) {
  auto prepared = prepare(catalog_, std::move(temp), filename, uploader, actor, limits(),
                          store::Sync::now, attestations);
  if (!prepared) return prepared.error();
  if (auto* done = std::get_if<Ingested>(&*prepared)) return std::move(*done);
  auto& p = std::get<Prepared>(*prepared);
  if (p.restore) return restore(catalog_, store_, p);
  // On an object store, a token revoked while the body arrived, a project claimed by another
  // uploader or a release the file contradicts uploads no object.
  if (publish_mode(store_) == Publish::ahead) return ingest_ahead(catalog_, store_, p);
  auto inserted =
      catalog_.insert_file(p.nf, [&]() -> Status { return publish(store_, p, store::Sync::now); });
  if (!inserted) return inserted.error();
  return to_ingested(*inserted, p.nf);
}

std::vector<Result<Ingested>> Ingestor::ingest_paths(
    const std::vector<std::filesystem::path>& paths) {
  const Limits limits = this->limits();
  std::vector<Result<Ingested>> results;
  results.reserve(paths.size());
  std::vector<std::size_t> pending_index;  // into results
  std::vector<Prepared> pending;
  std::vector<std::size_t> restore_index;  // into results
  std::vector<Prepared> restores;          // damaged files healed by their own bytes (rare)
  for (const auto& path : paths) {
    auto temp = copy_to_temp(path);
    if (!temp) {
      results.emplace_back(temp.error());
      continue;
    }
    auto prepared = prepare(catalog_, std::move(*temp), path.filename().string(), {}, {}, limits,
                            store::Sync::deferred);
    if (!prepared) {
      results.emplace_back(prepared.error());
    } else if (auto* done = std::get_if<Ingested>(&*prepared)) {
      results.emplace_back(std::move(*done));
    } else if (std::get<Prepared>(*prepared).restore) {
      restore_index.push_back(results.size());
      results.emplace_back(make_error(Errc::internal, "not restored"));  // set below
      restores.push_back(std::move(std::get<Prepared>(*prepared)));
    } else {
      pending_index.push_back(results.size());
      results.emplace_back(make_error(Errc::internal, "not recorded"));  // set below
      pending.push_back(std::move(std::get<Prepared>(*prepared)));
    }
  }
  if (pending.empty() && restores.empty()) return results;
  const auto fail_pending = [&](const Error& e) {
    for (const std::size_t i : pending_index) results[i] = e;
  };
  // The bulk of the data reaches the disk before the catalog's write lock is taken, so that
  // other writers (the server's uploads) do not wait for it; the flush before COMMIT then
  // covers the renames and the small METADATA blobs.
  if (auto st = store_.flush(); !st) {
    fail_pending(st.error());
    for (const std::size_t i : restore_index) results[i] = st.error();
    return results;
  }
  // Restores publish with their own syncs, one transaction each: the flush above made their
  // data durable.
  for (std::size_t k = 0; k < restores.size(); ++k)
    results[restore_index[k]] = restore(catalog_, store_, restores[k]);
  if (pending.empty()) return results;
  const Publish mode = publish_mode(store_);
  // A second file of this batch under a name already in it waits for the batch's transaction
  // (on an object store), so that the catalog's answer for it is known before its upload.
  std::vector<std::size_t> later_index;
  std::vector<Prepared> later;
  if (mode == Publish::ahead) {
    // Asked about and uploaded one by one before the transaction; a file the catalog refuses
    // or whose upload failed is not uploaded or not recorded.
    std::vector<std::size_t> kept_index;
    std::vector<Prepared> kept;
    std::set<std::string, std::less<>> names;
    for (std::size_t k = 0; k < pending.size(); ++k) {
      if (!names.insert(core::canonical_file_key(pending[k].nf.file.filename)).second) {
        later_index.push_back(pending_index[k]);
        later.push_back(std::move(pending[k]));
        continue;
      }
      if (auto settled = upload_ahead(catalog_, store_, pending[k])) {
        results[pending_index[k]] = std::move(*settled);
        continue;
      }
      kept_index.push_back(pending_index[k]);
      kept.push_back(std::move(pending[k]));
    }
    pending_index = std::move(kept_index);
    pending = std::move(kept);
  }
  const auto ingest_later = [&] {
    for (std::size_t k = 0; k < later.size(); ++k) {
      results[later_index[k]] = ingest_ahead(catalog_, store_, later[k]);
    }
    return results;
  };
  if (pending.empty()) return ingest_later();
  std::vector<catalog::NewFile> files;
  files.reserve(pending.size());
  for (auto& p : pending) files.push_back(std::move(p.nf));
  auto inserted = catalog_.insert_files(
      files,
      [&](std::size_t k) {
        return mode == Publish::ahead ? ok_status()
                                      : publish(store_, pending[k], store::Sync::deferred);
      },
      [&] { return store_.flush(); });
  if (!inserted) {
    fail_pending(inserted.error());
    return ingest_later();
  }
  for (std::size_t k = 0; k < pending.size(); ++k) {
    auto& r = (*inserted)[k];
    results[pending_index[k]] = r ? to_ingested(*r, files[k]) : Result<Ingested>(r.error());
  }
  return ingest_later();
}

Status Ingestor::check(const std::filesystem::path& file, std::string_view filename) const {
  auto v = validate(file, filename, limits());
  if (!v) return v.error();
  return ok_status();
}

Result<store::TempFile> Ingestor::copy_to_temp(const std::filesystem::path& path) const {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return errno_error(errno, "open " + path.string());
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) return errno_error(errno, "stat " + path.string());
  if (!S_ISREG(st.st_mode)) return make_error(Errc::invalid, "not a regular file");
  if (static_cast<std::uint64_t>(st.st_size) > limits().max_file_size) {
    return make_error(Errc::too_large, "file is larger than the limit of " +
                                           std::to_string(limits().max_file_size) + " bytes");
  }
  auto temp = store_.create_temp();
  if (!temp) return temp.error();
  std::string buffer(1U << 20U, '\0');
  while (true) {
    const ssize_t n = ::read(fd.get(), buffer.data(), buffer.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno_error(errno, "read " + path.string());
    }
    if (n == 0) break;
    if (auto w = temp->write(buffer.data(), static_cast<std::size_t>(n)); !w) return w.error();
  }
  return temp;
}

Result<std::pair<core::FileRecord, bool>> Ingestor::add_attestations(
    std::string_view filename, const Attestations& attestations, const catalog::Actor& actor) {
  auto found = catalog_.find_file(filename);
  if (!found) return found.error();
  if (!found->has_value()) {
    return make_error(Errc::not_found, "no file named " + std::string(filename) +
                                           ": upload the file first, then its attestations");
  }
  core::FileRecord file = std::move(**found);
  if (file.damaged) {
    return make_error(Errc::unavailable,
                      file.filename + " is damaged: attestations wait until it is restored");
  }
  auto provenance = provenance_of(attestations, file.filename, file.sha256);
  if (!provenance) return provenance.error();
  const std::string provenance_sha256 = crypto::sha256_hex(*provenance);
  if (file.provenance_sha256 == provenance_sha256) return std::pair{std::move(file), false};
  if (!file.provenance_sha256.empty()) {
    return make_error(Errc::conflict, catalog::provenance_exists_message(file.filename));
  }
  // The blob first, then the row that names it: a crash or a refusal between leaves an
  // unreferenced blob, which gc removes (a concurrent request for the same file may be
  // recording it), never a row without its blob.
  if (auto put = store_.put(*provenance, store::Sync::now); !put) return put.error();
  auto set = catalog_.set_provenance(file.filename, file.sha256, provenance_sha256,
                                     provenance->size(), actor);
  if (!set) return set.error();
  file.provenance_sha256 = provenance_sha256;
  file.provenance_size = provenance->size();
  return std::pair{std::move(file), *set};
}

Result<Ingested> Ingestor::ingest_path(const std::filesystem::path& path,
                                       const catalog::Actor& actor,
                                       const Attestations* attestations) {
  auto temp = copy_to_temp(path);
  if (!temp) return temp.error();
  return ingest(std::move(*temp), path.filename().string(), {}, actor, attestations);
}

}  // namespace wf::ingest
