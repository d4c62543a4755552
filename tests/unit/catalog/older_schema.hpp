#pragma once
// SQL that makes a catalog database look as if an older wheelforge had written it: the undoing
// of each migration after `version`, newest first (sqlite_schema.cpp holds the migrations).
// A new migration adds its undoing here, so that every upgrade test starts from its version.

#include <map>
#include <string>

namespace wf::catalog::testing {

inline std::string undo_migrations_after(int version) {
  static const std::map<int, std::string> kUndo = {
      {5,
       "DROP TRIGGER projects_upd; ALTER TABLE projects DROP COLUMN owner_token_id;"
       " ALTER TABLE projects DROP COLUMN claimed_by;"},
      {7,
       "DROP INDEX files_canonical; DROP INDEX deleted_files_canonical;"
       " ALTER TABLE files DROP COLUMN canonical; ALTER TABLE deleted_files DROP COLUMN "
       "canonical;"},
      {8,
       "ALTER TABLE jobs DROP COLUMN nvcc_path; ALTER TABLE jobs DROP COLUMN nvcc_version;"
       " ALTER TABLE jobs DROP COLUMN torch_version; ALTER TABLE jobs DROP COLUMN torch_cuda;"
       " ALTER TABLE jobs DROP COLUMN python_path; ALTER TABLE jobs DROP COLUMN python_version;"},
      {9,
       "ALTER TABLE jobs DROP COLUMN glibc_floor; ALTER TABLE jobs DROP COLUMN build_number;"
       " ALTER TABLE builds DROP COLUMN yank_superseded;"},
      {10, "ALTER TABLE jobs DROP COLUMN executor_job;"},
      {11,
       "DROP TABLE audit; ALTER TABLE files DROP COLUMN uploaded_by_token;"
       " ALTER TABLE files DROP COLUMN uploaded_by; DROP TRIGGER tokens_upd;"
       " CREATE TRIGGER tokens_upd AFTER UPDATE ON tokens"
       " BEGIN UPDATE meta SET generation = generation + 1; END;"
       " ALTER TABLE tokens DROP COLUMN created_by; ALTER TABLE tokens DROP COLUMN last_used_at;"
       " ALTER TABLE tokens DROP COLUMN expires_at;"},
      {12, "ALTER TABLE files DROP COLUMN binaries;"},
      {13, "ALTER TABLE files DROP COLUMN variant;"},
      {14, "DROP TABLE upstream_blobs;"},
      {15, "ALTER TABLE upstream_blobs DROP COLUMN last_used_at;"},
      {16,
       "ALTER TABLE jobs DROP COLUMN image; ALTER TABLE jobs DROP COLUMN image_digest;"
       " ALTER TABLE jobs DROP COLUMN engine_command;"},
      {17, "DROP TABLE oidc_jtis; DROP TABLE trusted_publishers;"},
      {18,
       "ALTER TABLE jobs DROP COLUMN claimed_by; ALTER TABLE jobs DROP COLUMN lease_expires_at;"},
      {19,
       "ALTER TABLE files DROP COLUMN provenance_sha256;"
       " ALTER TABLE files DROP COLUMN provenance_size; ALTER TABLE tokens DROP COLUMN "
       "publisher_id;"},
  };
  std::string sql;
  for (auto it = kUndo.rbegin(); it != kUndo.rend() && it->first > version; ++it) {
    sql += it->second;
    sql += ' ';
  }
  return sql;
}

}  // namespace wf::catalog::testing
