// .ci/doc_outputs on a scratch tree (a doc and a fake program): it must fail with a diff
// on a stale block, rewrite blocks with --update, paste Markdown unfenced, and refuse a
// failing program or an unclosed block; the expected docs are written out by hand.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <sys/wait.h>

#include "tests/skip.h"
#include "tests/temp_dir.h"

namespace fs = std::filesystem;
using hg::test::TempDir;

namespace {

std::string read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void write(const std::string& path, const std::string& text) {
  fs::create_directories(fs::path(path).parent_path());
  std::ofstream(path) << text;
}

struct Tree {
  TempDir dir;
  std::string log;
  Tree() {
    log = dir / "log.txt";
    // The program: prints its argument; "fail" makes it exit 1.
    write(dir / "build/examples/say", "#!/bin/sh\n[ \"$1\" = fail ] && exit 1\necho \"said $1\"\necho '| a | b |'\n");
    fs::permissions(dir / "build/examples/say", fs::perms::owner_all);
  }
  int run(const std::string& args) {
    const std::string script = std::string(HG_SOURCE_DIR) + "/.ci/doc_outputs";
    const int rc = std::system(("python3 '" + script + "' --root '" + dir.path + "' " + args + " >'" + log + "' 2>&1").c_str());
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
  }
};

}  // namespace

TEST_CASE("doc_outputs fails on a stale block and --update rewrites it", "[doc_outputs]") {
  if (std::system("python3 -c 'import difflib' >/dev/null 2>&1") != 0) HG_SKIP("python3 not installed");
  Tree t;
  const std::string stale = "Intro.\n<!-- output: examples/say hi -->\n```text\nold text\n```\nEnd.\n";
  write(t.dir / "docs/a.md", stale);
  CHECK(t.run("") == 1);
  INFO(read(t.log));
  CHECK(read(t.log).find("+said hi") != std::string::npos);
  CHECK(read(t.dir / "docs/a.md") == stale);  // CI mode writes nothing

  CHECK(t.run("--update") == 0);
  CHECK(read(t.dir / "docs/a.md") ==
        "Intro.\n<!-- output: examples/say hi -->\n```text\n$ build/examples/say hi\nsaid hi\n| a | b |\n```\nEnd.\n");
  CHECK(t.run("") == 0);
}

TEST_CASE("doc_outputs pastes a Markdown block unfenced", "[doc_outputs]") {
  if (std::system("python3 -c 'import difflib' >/dev/null 2>&1") != 0) HG_SKIP("python3 not installed");
  Tree t;
  write(t.dir / "docs/b.md", "<!-- markdown: examples/say x -->\nstale\nlines\n<!-- /markdown -->\ntail\n");
  CHECK(t.run("--update") == 0);
  CHECK(read(t.dir / "docs/b.md") == "<!-- markdown: examples/say x -->\nsaid x\n| a | b |\n<!-- /markdown -->\ntail\n");
}

TEST_CASE("doc_outputs refuses a failing program, a missing one and an unclosed block", "[doc_outputs]") {
  if (std::system("python3 -c 'import difflib' >/dev/null 2>&1") != 0) HG_SKIP("python3 not installed");
  Tree t;
  const std::string doc = "<!-- output: examples/say fail -->\n```text\n```\n";
  write(t.dir / "docs/c.md", doc);
  CHECK(t.run("--update") != 0);
  CHECK(read(t.log).find("'examples/say fail' exited with 1") != std::string::npos);
  CHECK(read(t.dir / "docs/c.md") == doc);

  write(t.dir / "docs/c.md", "<!-- output: examples/none -->\n```text\n```\n");
  CHECK(t.run("") != 0);
  CHECK(read(t.log).find("examples/none does not exist") != std::string::npos);

  write(t.dir / "docs/c.md", "<!-- output: examples/say hi -->\n```text\nno end\n");
  CHECK(t.run("") != 0);
  CHECK(read(t.log).find("is not closed") != std::string::npos);
}
