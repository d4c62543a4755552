#include "wheelforge/snapshot/snapshot.hpp"

#include <gtest/gtest.h>

namespace wf::snapshot {
namespace {

core::FileRecord file(const std::string& project, const std::string& version) {
  core::FileRecord f;
  f.project = project;
  f.version = version;
  f.filename = project + "-" + version + "-py3-none-any.whl";
  f.sha256 = std::string(64, 'a');
  f.size = 10;
  f.tags = core::WheelTags{std::nullopt, "py3", "none", "any", std::nullopt};
  return f;
}

// A 64-hex-digit stand-in digest, distinct per file name.
std::string crypto_like(const std::string& name) {
  std::string out = std::to_string(std::hash<std::string>{}(name));
  out.resize(64, '0');
  return out;
}

catalog::Contents contents(std::uint64_t generation,
                           const std::vector<std::pair<std::string, std::vector<std::string>>>& p) {
  catalog::Contents c;
  c.generation = generation;
  for (const auto& [name, versions] : p) {
    c.projects.push_back(core::ProjectRecord{name, name, 1, {}});
    for (const auto& v : versions) c.files.push_back(file(name, v));
  }
  return c;
}

std::string page(const Snapshot& s, std::string_view project) {
  auto p = s.project_page(project, core::PageFormat::json_v1);
  return p ? p->body : "<none>";
}

TEST(Snapshot, OrdersFilesByVersion) {
  auto s = Snapshot::build(contents(1, {{"a", {"1.10", "1.2", "1.9"}}}));
  const std::string body = page(*s, "a");
  EXPECT_LT(body.find("a-1.2-"), body.find("a-1.9-"));
  EXPECT_LT(body.find("a-1.9-"), body.find("a-1.10-"));
  EXPECT_EQ(s->file_count(), 3U);
}

TEST(Snapshot, DamagedFilesAreOnNoPageButFoundAsDamaged) {
  auto c = contents(3, {{"a", {"1.0", "2.0"}}});
  c.files[1].damaged = true;
  c.files[1].sha256 = std::string(64, 'd');
  auto s = Snapshot::build(c);
  const std::string body = page(*s, "a");
  EXPECT_NE(body.find("a-1.0-"), std::string::npos);
  EXPECT_EQ(body.find("a-2.0-"), std::string::npos);
  EXPECT_EQ(s->file_count(), 1U);
  EXPECT_EQ(s->files_of("a").size(), 1U);
  EXPECT_EQ(s->find_file("a-2.0-py3-none-any.whl"), nullptr);
  ASSERT_NE(s->find_damaged("a-2.0-py3-none-any.whl"), nullptr);
  EXPECT_EQ(s->find_damaged("a-2.0-py3-none-any.whl")->sha256, std::string(64, 'd'));
  EXPECT_EQ(s->find_damaged("a-1.0-py3-none-any.whl"), nullptr);
  core::ViewSelector cpu;
  cpu.backend = core::Backend::cpu;
  EXPECT_EQ(s->view_files_of(cpu, "a").size(), 1U);

  // The same after an update of the project, and back once healed.
  auto healed = contents(4, {{"a", {"1.0", "2.0"}}});
  auto updated = Snapshot::update(*s, "a", healed);
  EXPECT_NE(updated->find_file("a-2.0-py3-none-any.whl"), nullptr);
  EXPECT_EQ(updated->find_damaged("a-2.0-py3-none-any.whl"), nullptr);
  EXPECT_EQ(updated->file_count(), 2U);
  auto again = Snapshot::update(*updated, "a", c);
  EXPECT_EQ(page(*again, "a"), body);
  EXPECT_NE(again->find_damaged("a-2.0-py3-none-any.whl"), nullptr);
}

TEST(Snapshot, UpdateMatchesAFullBuild) {
  auto before = Snapshot::build(contents(5, {{"a", {"1.0"}}, {"c", {"2.0", "1.0"}}}));
  // A file added to an existing project.
  auto after_c = Snapshot::update(*before, "c", contents(6, {{"c", {"2.0", "1.0", "3.0"}}}));
  auto full_c = Snapshot::build(contents(6, {{"a", {"1.0"}}, {"c", {"2.0", "1.0", "3.0"}}}));
  EXPECT_EQ(after_c->generation(), 6U);
  EXPECT_EQ(after_c->file_count(), full_c->file_count());
  EXPECT_EQ(after_c->project_count(), 2U);
  EXPECT_EQ(page(*after_c, "c"), page(*full_c, "c"));
  EXPECT_EQ(page(*after_c, "a"), page(*full_c, "a"));
  EXPECT_NE(after_c->find_file("c-3.0-py3-none-any.whl"), nullptr);
  // The previous snapshot is unchanged.
  EXPECT_EQ(before->find_file("c-3.0-py3-none-any.whl"), nullptr);
  EXPECT_EQ(before->file_count(), 3U);

  // A new project lands in name order.
  auto after_b = Snapshot::update(*after_c, "b", contents(7, {{"b", {"0.1"}}}));
  auto full_b =
      Snapshot::build(contents(7, {{"a", {"1.0"}}, {"b", {"0.1"}}, {"c", {"2.0", "1.0", "3.0"}}}));
  EXPECT_EQ(after_b->project_count(), 3U);
  EXPECT_EQ(after_b->root_page(core::PageFormat::json_v1)->body,
            full_b->root_page(core::PageFormat::json_v1)->body);
  ASSERT_NE(after_b->find_project("b"), nullptr);
  EXPECT_NE(after_b->find_file("b-0.1-py3-none-any.whl"), nullptr);

  // A project that is gone is removed.
  auto after_a = Snapshot::update(*after_b, "a", contents(8, {}));
  EXPECT_EQ(after_a->find_project("a"), nullptr);
  EXPECT_EQ(after_a->find_file("a-1.0-py3-none-any.whl"), nullptr);
  EXPECT_EQ(after_a->project_count(), 2U);
  EXPECT_EQ(after_a->file_count(), 4U);
}

// A catalog grown one project at a time past the size its indexes were planned for (so that
// they are rebuilt on the way), with files of distinct digests, then one project shrunk:
// every lookup answers as a snapshot built whole answers, and earlier snapshots are unchanged.
TEST(Snapshot, UpdatesFromEmptyToTwentyThousandFilesFindWhatAFullBuildFinds) {
  const auto project = [](int i) { return "p" + std::to_string(10'000 + i); };
  const auto versions = [](int n) {
    std::vector<std::string> out;
    for (int v = 0; v < n; ++v) out.push_back("1." + std::to_string(v));
    return out;
  };
  const auto distinct = [](catalog::Contents c) {
    for (auto& f : c.files) f.sha256 = crypto_like(f.filename);
    return c;
  };
  constexpr int kProjects = 400;
  constexpr int kFiles = 50;
  std::shared_ptr<const Snapshot> s = Snapshot::build(contents(1, {}));
  std::vector<std::pair<std::string, std::vector<std::string>>> all;
  std::shared_ptr<const Snapshot> halfway;
  for (int i = 0; i < kProjects; ++i) {
    all.emplace_back(project(i), versions(kFiles));
    s = Snapshot::update(
        *s, project(i),
        distinct(contents(static_cast<std::uint64_t>(i + 2), {{project(i), versions(kFiles)}})));
    if (i == kProjects / 2) halfway = s;
  }
  auto full = Snapshot::build(distinct(contents(kProjects + 1, all)));
  EXPECT_EQ(s->file_count(), full->file_count());
  EXPECT_EQ(s->project_count(), full->project_count());
  for (int i = 0; i < kProjects; i += 7) {
    for (const auto& v : versions(kFiles)) {
      const std::string name = project(i) + "-" + v + "-py3-none-any.whl";
      const core::FileRecord* found = s->find_file(name);
      ASSERT_NE(found, nullptr) << name;
      EXPECT_EQ(s->find_file_by_sha256(crypto_like(name)), found) << name;
      EXPECT_NE(full->find_file(name), nullptr) << name;
    }
    EXPECT_EQ(page(*s, project(i)), page(*full, project(i)));
  }
  EXPECT_EQ(s->root_page(core::PageFormat::json_v1)->body,
            full->root_page(core::PageFormat::json_v1)->body);

  // One project loses its files but one: the others are gone from the new snapshot only.
  auto shrunk =
      Snapshot::update(*s, project(3), distinct(contents(kProjects + 2, {{project(3), {"1.0"}}})));
  EXPECT_EQ(shrunk->file_count(), s->file_count() - (kFiles - 1));
  const std::string gone = project(3) + "-1.7-py3-none-any.whl";
  EXPECT_EQ(shrunk->find_file(gone), nullptr);
  EXPECT_EQ(shrunk->find_file_by_sha256(crypto_like(gone)), nullptr);
  EXPECT_NE(shrunk->find_file(project(3) + "-1.0-py3-none-any.whl"), nullptr);
  EXPECT_NE(s->find_file(gone), nullptr);
  EXPECT_NE(halfway->find_file(gone), nullptr);
  EXPECT_EQ(halfway->find_project(project(kProjects - 1)), nullptr);
  EXPECT_EQ(halfway->file_count(), static_cast<std::size_t>(kProjects / 2 + 1) * kFiles);
}

// Several projects in one update: one changed, one added, one removed; the generation is the
// load's.
TEST(Snapshot, OneUpdateOfSeveralProjectsMatchesAFullBuild) {
  auto before = Snapshot::build(contents(5, {{"a", {"1.0"}}, {"c", {"2.0"}}, {"d", {"0.1"}}}));
  // As Catalog::load_projects answers for "c", "b" and "d" (gone), named in any order.
  auto after = Snapshot::update(*before, {"c", "b", "d", "c"},
                                contents(9, {{"b", {"1.0"}}, {"c", {"2.0", "3.0"}}}));
  auto full = Snapshot::build(contents(9, {{"a", {"1.0"}}, {"b", {"1.0"}}, {"c", {"2.0", "3.0"}}}));
  EXPECT_EQ(after->generation(), 9U);
  EXPECT_EQ(after->file_count(), full->file_count());
  EXPECT_EQ(after->root_page(core::PageFormat::json_v1)->body,
            full->root_page(core::PageFormat::json_v1)->body);
  for (const char* p : {"a", "b", "c"}) EXPECT_EQ(page(*after, p), page(*full, p)) << p;
  EXPECT_EQ(after->find_project("d"), nullptr);
  EXPECT_EQ(after->find_file("d-0.1-py3-none-any.whl"), nullptr);
  EXPECT_NE(before->find_file("d-0.1-py3-none-any.whl"), nullptr);
  EXPECT_EQ(Snapshot::update(*after, std::vector<std::string>{}, contents(10, {})), nullptr);
}

// Two projects holding the same bytes: updating one leaves the other's found by digest.
TEST(Snapshot, SharedBytesStayFoundByDigestWhenOneHolderChanges) {
  auto s = Snapshot::build(contents(1, {{"a", {"1.0"}}, {"b", {"1.0"}}}));
  const std::string digest(64, 'a');
  ASSERT_NE(s->find_file_by_sha256(digest), nullptr);
  auto without_a = Snapshot::update(*s, "a", contents(2, {}));
  const core::FileRecord* left = without_a->find_file_by_sha256(digest);
  ASSERT_NE(left, nullptr);
  EXPECT_EQ(left->filename, "b-1.0-py3-none-any.whl");
  auto without_b = Snapshot::update(*without_a, "b", contents(3, {}));
  EXPECT_EQ(without_b->find_file_by_sha256(digest), nullptr);
  EXPECT_NE(s->find_file_by_sha256(digest), nullptr);
}

}  // namespace
}  // namespace wf::snapshot
