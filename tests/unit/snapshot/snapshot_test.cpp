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

}  // namespace
}  // namespace wf::snapshot
