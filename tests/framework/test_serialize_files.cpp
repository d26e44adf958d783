// What the file system can throw at the serializers (issue 17, items 3, 7, 8): a FIFO
// where a file should be, temporaries left by killed writers, zero-size tensors next to
// huge sizes in a header.
#include <catch2/catch.hpp>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <string>
#include <vector>

#include "halfgrad.h"
#include "framework/serialize/atomic_write.h"
#include "tests/temp_dir.h"

using namespace hg;
using hg::test::TempDir;

namespace {

// A pid that ran and has exited (reaped), so no process has it for now.
pid_t dead_pid() {
  const pid_t pid = ::fork();
  if (pid == 0) ::_exit(0);
  REQUIRE(pid > 0);
  REQUIRE(::waitpid(pid, nullptr, 0) == pid);
  return pid;
}

void touch(const std::string& path) { std::ofstream(path) << "partial"; }

}  // namespace

TEST_CASE("load_safetensors refuses a FIFO instead of waiting for a writer forever", "[safetensors][files]") {
  TempDir dir;
  const std::string fifo = dir / "pipe.safetensors";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  // In a child, so that a regression hangs the child (killed below), not the suite.
  const pid_t child = ::fork();
  if (child == 0) {
    try {
      load_safetensors(fifo);
    } catch (const Error& e) {
      ::_exit(std::string(e.what()).find("not a regular file (a FIFO)") != std::string::npos ? 0 : 3);
    }
    ::_exit(4);
  }
  REQUIRE(child > 0);
  int status = 0;
  pid_t done = 0;
  for (int i = 0; i < 600 && (done = ::waitpid(child, &status, WNOHANG)) == 0; ++i) ::usleep(50'000);
  if (done == 0) {
    ::kill(child, SIGKILL);
    ::waitpid(child, &status, 0);
    FAIL("load_safetensors on a FIFO blocked for 30 s");
  }
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
}

TEST_CASE("a save removes the temporaries of dead writers, and only those", "[safetensors][files]") {
  TempDir dir;
  const pid_t dead = dead_pid();
  const std::string dead_tmp = "model.safetensors.tmp." + std::to_string(dead) + ".3";
  const std::string other_dead_tmp = "report.json.tmp." + std::to_string(dead) + ".0";
  const std::string own_tmp = "model.safetensors.tmp." + std::to_string(::getpid()) + ".99";
  const std::string parent_tmp = "x.tmp." + std::to_string(::getppid()) + ".1";  // a live process
  for (const std::string& f : {dead_tmp, other_dead_tmp, own_tmp, parent_tmp, std::string("notes.tmp.abc.1"),
                               std::string("a.tmp.12"), std::string(".tmp.1.1")})
    touch(dir / f);
  ::mkdir((dir / ("sub.tmp." + std::to_string(dead) + ".1")).c_str(), 0700);  // not a regular file: kept

  save(dir / "model.safetensors", {{"w", ones({2})}});
  std::vector<std::string> want = {".tmp.1.1", "a.tmp.12", "model.safetensors", own_tmp, "notes.tmp.abc.1",
                                   "sub.tmp." + std::to_string(dead) + ".1", parent_tmp};
  std::sort(want.begin(), want.end());
  CHECK(dir.listing() == want);
  CHECK(load(dir / "model.safetensors").at("w").to_vector<double>() == std::vector<double>{1, 1});
  CHECK(remove_stale_temporaries(dir.path) == 0);
  CHECK(remove_stale_temporaries(dir / "absent") == 0);
}

TEST_CASE("a header with a zero size next to huge ones is an hg::Error in any order", "[safetensors][files]") {
  TempDir dir;
  const std::string path = dir / "z.safetensors";
  for (const std::string shape : {"[0,3037000500,3037000500]", "[3037000500,3037000500,0]", "[3037000500,0,3037000500]"}) {
    INFO(shape);
    const std::string header = "{\"a\":{\"dtype\":\"F32\",\"shape\":" + shape + ",\"data_offsets\":[0,0]}}";
    std::string bytes(8, '\0');
    for (int i = 0; i < 8; ++i) bytes[i] = static_cast<char>(uint64_t{header.size()} >> (8 * i));
    std::ofstream(path, std::ios::binary) << bytes << header;
    CHECK_THROWS_WITH(load(path), Catch::Contains("overflow a 64-bit byte count"));
  }
  // A zero size next to ordinary ones is an empty tensor.
  save(path, {{"e", zeros({0, 3, 5})}});
  CHECK(load(path).at("e").shape() == Shape{0, 3, 5});
}
