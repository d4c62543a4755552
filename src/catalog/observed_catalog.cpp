// observe_catalog(): a Catalog that times every call of the one it wraps and tells a
// CallObserver (the server's metrics). The time the caller's callbacks run inside a call (a
// blob published to the object store inside insert_file's transaction) is the blob store's,
// not the database's: it is measured and left out.

#include <utility>

#include "wheelforge/catalog/catalog.hpp"

namespace wf::catalog {

namespace {

using Clock = std::chrono::steady_clock;

class ObservedCatalog final : public Catalog {
  /// The time the caller's callbacks ran during one call (a callback may run several times:
  /// a retried transaction).
  struct Excluded {
    Clock::duration total{};
    template <class R, class... Args>
    std::function<R(Args...)> wrap(const std::function<R(Args...)>& f) {
      return [this, &f](Args... args) {
        const auto start = Clock::now();
        R r = f(std::forward<Args>(args)...);
        total += Clock::now() - start;
        return r;
      };
    }
  };

  template <class Call>
  auto timed(CallKind kind, Call&& call) {
    Excluded excluded;
    const auto start = Clock::now();
    auto result = call(excluded);
    const auto took = Clock::now() - start - excluded.total;
    observer_->catalog_call(backend_, kind,
                            std::chrono::duration_cast<std::chrono::nanoseconds>(took),
                            result ? nullptr : &result.error());
    return result;
  }

 public:
  ObservedCatalog(std::unique_ptr<Catalog> inner, std::string backend,
                  std::shared_ptr<CallObserver> observer)
      : inner_(std::move(inner)), backend_(std::move(backend)), observer_(std::move(observer)) {}

  Result<std::optional<core::FileRecord>> find_file(std::string_view filename) override {
    return timed(CallKind::read, [&](Excluded&) { return inner_->find_file(filename); });
  }
  Result<std::optional<core::FileRecord>> find_same_file(std::string_view filename,
                                                         std::string_view sha256) override {
    return timed(CallKind::read,
                 [&](Excluded&) { return inner_->find_same_file(filename, sha256); });
  }
  Result<Inserted> insert_file(const NewFile& file,
                               const std::function<Status()>& publish) override {
    return timed(CallKind::write, [&](Excluded& ex) {
      return inner_->insert_file(file, publish ? ex.wrap(publish) : publish);
    });
  }
  Result<std::vector<Result<Inserted>>> insert_files(
      const std::vector<NewFile>& files, const std::function<Status(std::size_t)>& publish,
      const std::function<Status()>& before_commit) override {
    return timed(CallKind::write, [&](Excluded& ex) {
      return inner_->insert_files(files, publish ? ex.wrap(publish) : publish,
                                  before_commit ? ex.wrap(before_commit) : before_commit);
    });
  }
  Result<std::uint64_t> generation() override {
    return timed(CallKind::read, [&](Excluded&) { return inner_->generation(); });
  }
  Result<std::uint64_t> position() override {
    return timed(CallKind::read, [&](Excluded&) { return inner_->position(); });
  }
  Result<Contents> load() override {
    return timed(CallKind::read, [&](Excluded&) { return inner_->load(); });
  }
  Result<core::ProjectRecord> set_claim(std::string_view project, const core::ProjectClaim& claim,
                                        const Actor& by) override {
    return timed(CallKind::write, [&](Excluded&) { return inner_->set_claim(project, claim, by); });
  }
  Result<Contents> load_projects(std::vector<std::string> projects) override {
    return timed(CallKind::read,
                 [&](Excluded&) { return inner_->load_projects(std::move(projects)); });
  }
  Result<TokenRecord> insert_token(const TokenRecord& token, const Actor& by) override {
    return timed(CallKind::write, [&](Excluded&) { return inner_->insert_token(token, by); });
  }
  Result<TokenRecord> revoke_token(std::int64_t id, const Actor& by) override {
    return timed(CallKind::write, [&](Excluded&) { return inner_->revoke_token(id, by); });
  }
  Result<PublisherRecord> insert_publisher(const PublisherRecord& publisher,
                                           const Actor& by) override {
    return timed(CallKind::write,
                 [&](Excluded&) { return inner_->insert_publisher(publisher, by); });
  }
  Result<PublisherRecord> remove_publisher(std::int64_t id, const Actor& by) override {
    return timed(CallKind::write, [&](Excluded&) { return inner_->remove_publisher(id, by); });
  }
  Result<std::vector<PublisherRecord>> publishers() override {
    return timed(CallKind::read, [&](Excluded&) { return inner_->publishers(); });
  }
  Result<TokenRecord> mint_token(const MintRequest& req, const Actor& by) override {
    return timed(CallKind::write, [&](Excluded&) { return inner_->mint_token(req, by); });
  }
  Result<std::vector<TokenRecord>> tokens() override {
    return timed(CallKind::read, [&](Excluded&) { return inner_->tokens(); });
  }
  Status record_token_uses(const std::vector<std::pair<std::int64_t, Micros>>& uses) override {
    return timed(CallKind::write, [&](Excluded&) { return inner_->record_token_uses(uses); });
  }
  Status record_upstream_blob(const UpstreamBlob& blob) override {
    return timed(CallKind::write, [&](Excluded&) { return inner_->record_upstream_blob(blob); });
  }
  Result<std::vector<UpstreamBlob>> upstream_blobs() override {
    return timed(CallKind::read, [&](Excluded&) { return inner_->upstream_blobs(); });
  }
  Status touch_upstream_blob(std::string_view sha256, Micros at) override {
    return timed(CallKind::write,
                 [&](Excluded&) { return inner_->touch_upstream_blob(sha256, at); });
  }
  Result<bool> forget_upstream_blob(std::string_view sha256) override {
    return timed(CallKind::write, [&](Excluded&) { return inner_->forget_upstream_blob(sha256); });
  }
  Result<std::vector<TableRows>> export_rows() override {
    return timed(CallKind::read, [&](Excluded&) { return inner_->export_rows(); });
  }
  Result<ImportCounts> import_rows(const TableRows& rows) override {
    return timed(CallKind::write, [&](Excluded&) { return inner_->import_rows(rows); });
  }
  Status record_audit(const AuditRecord& entry) override {
    return timed(CallKind::write, [&](Excluded&) { return inner_->record_audit(entry); });
  }
  Result<std::vector<AuditRecord>> audit(const AuditQuery& query) override {
    return timed(CallKind::read, [&](Excluded&) { return inner_->audit(query); });
  }
  Result<std::vector<std::string>> set_yanked(std::string_view project,
                                              const std::optional<std::string>& version,
                                              const std::optional<std::string>& filename,
                                              const std::optional<std::string>& reason,
                                              const Actor& by) override {
    return timed(CallKind::write, [&](Excluded&) {
      return inner_->set_yanked(project, version, filename, reason, by);
    });
  }
  Result<core::FileRecord> delete_file(std::string_view filename, const Actor& by) override {
    return timed(CallKind::write, [&](Excluded&) { return inner_->delete_file(filename, by); });
  }
  Result<bool> is_reserved(std::string_view filename) override {
    return timed(CallKind::read, [&](Excluded&) { return inner_->is_reserved(filename); });
  }
  Result<std::optional<Inserted>> precheck(const NewFile& file) override {
    return timed(CallKind::read, [&](Excluded&) { return inner_->precheck(file); });
  }
  Result<std::optional<DeletedFile>> find_reservation(std::string_view filename) override {
    return timed(CallKind::read, [&](Excluded&) { return inner_->find_reservation(filename); });
  }
  Result<std::vector<DeletedFile>> deleted_files(std::string_view project) override {
    return timed(CallKind::read, [&](Excluded&) { return inner_->deleted_files(project); });
  }
  Result<std::vector<BlobRef>> referenced_blobs() override {
    return timed(CallKind::read, [&](Excluded&) { return inner_->referenced_blobs(); });
  }
  Result<core::FileRecord> restore_file(std::string_view filename, std::string_view sha256,
                                        const std::function<Status()>& publish) override {
    return timed(CallKind::write, [&](Excluded& ex) {
      return inner_->restore_file(filename, sha256, publish ? ex.wrap(publish) : publish);
    });
  }
  Result<bool> mark_damaged(std::string_view sha256, std::string_view detail,
                            const std::function<Result<bool>()>& quarantine) override {
    return timed(CallKind::write, [&](Excluded& ex) {
      return inner_->mark_damaged(sha256, detail, quarantine ? ex.wrap(quarantine) : quarantine);
    });
  }
  Status clear_damaged(const std::vector<std::string>& sha256s) override {
    return timed(CallKind::write, [&](Excluded&) { return inner_->clear_damaged(sha256s); });
  }
  Result<std::vector<DamagedBlob>> damaged_blobs() override {
    return timed(CallKind::read, [&](Excluded&) { return inner_->damaged_blobs(); });
  }
  Result<std::vector<UninspectedWheel>> uninspected_wheels() override {
    return timed(CallKind::read, [&](Excluded&) { return inner_->uninspected_wheels(); });
  }
  Result<bool> set_provenance(std::string_view filename, std::string_view sha256,
                              std::string_view provenance_sha256, std::uint64_t provenance_size,
                              const Actor& by) override {
    return timed(CallKind::write, [&](Excluded&) {
      return inner_->set_provenance(filename, sha256, provenance_sha256, provenance_size, by);
    });
  }
  Result<bool> record_findings(std::string_view filename, std::string_view sha256,
                               const core::WheelFindings& findings) override {
    return timed(CallKind::write,
                 [&](Excluded&) { return inner_->record_findings(filename, sha256, findings); });
  }
  Status backup_to(const std::filesystem::path& dest) override {
    return timed(CallKind::read, [&](Excluded&) { return inner_->backup_to(dest); });
  }

 private:
  std::unique_ptr<Catalog> inner_;
  std::string backend_;
  std::shared_ptr<CallObserver> observer_;
};

}  // namespace

std::unique_ptr<Catalog> observe_catalog(std::unique_ptr<Catalog> catalog, std::string backend,
                                         std::shared_ptr<CallObserver> observer) {
  if (!observer) return catalog;
  return std::make_unique<ObservedCatalog>(std::move(catalog), std::move(backend),
                                           std::move(observer));
}

std::string_view catalog_backend(std::string_view location) {
  return is_postgres_location(location) ? "postgresql" : "sqlite";
}

}  // namespace wf::catalog
