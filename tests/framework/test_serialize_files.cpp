// What the file system can throw at the serializers (issue 17, items 3, 7, 8; issue 29,
// item 3): a FIFO where a file should be, temporaries left by killed writers next to live
// writers' and other people's files, zero-size tensors next to huge sizes in a header.
#include <catch2/catch.hpp>
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <thread>
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

TEST_CASE("a save removes only its own target's unlocked temporaries, never other files", "[safetensors][files]") {
  TempDir dir;
  const std::string target = dir / "model.safetensors";
  const std::string prefix = ".model.safetensors.hg-tmp.";
  REQUIRE(temporary_prefix(target) == dir / prefix);
  const std::string stale = prefix + "0123456789abcdef";  // a killed writer's: no lock on it
  const std::string held = prefix + "fedcba9876543210";   // a live writer's: locked below
  const std::string other = ".report.json.hg-tmp.0123456789abcdef";  // another target's
  // Names that are not this library's temporaries, whatever pid they seem to carry.
  const pid_t dead = dead_pid();
  const std::vector<std::string> foreign = {"mydata.tmp.4000000.1", "results.csv.tmp.123456789.0",
                                            "model.safetensors.tmp." + std::to_string(dead) + ".3",
                                            prefix + "0123", prefix + "0123456789ABCDEF", prefix + "0123456789abcdefX"};
  for (const std::string& f : foreign) touch(dir / f);
  for (const std::string& f : {stale, held, other}) touch(dir / f);
  ::mkdir((dir / (prefix + "00000000000000aa")).c_str(), 0700);  // not a regular file
  REQUIRE(::symlink("model.safetensors", (dir / (prefix + "00000000000000bb")).c_str()) == 0);
  // A live writer, in whatever process or pid namespace, holds LOCK_EX on its file.
  const int fd = ::open((dir / held).c_str(), O_RDONLY | O_CLOEXEC);
  REQUIRE(fd >= 0);
  REQUIRE(::flock(fd, LOCK_EX) == 0);

  save(target, {{"w", ones({2})}});
  std::vector<std::string> want = foreign;
  for (const std::string& f : {held, other, std::string("model.safetensors"), prefix + "00000000000000aa",
                               prefix + "00000000000000bb"})
    want.push_back(f);
  std::sort(want.begin(), want.end());
  CHECK(dir.listing() == want);
  CHECK(load(target).at("w").to_vector<double>() == std::vector<double>{1, 1});

  CHECK(remove_stale_temporaries(target) == 0);  // still held
  ::close(fd);  // the writer died: its lock went with it
  CHECK(remove_stale_temporaries(dir / "report.json") == 1);
  CHECK(remove_stale_temporaries(target) == 1);
  CHECK(!std::filesystem::exists(dir / held));
  CHECK(std::filesystem::exists(dir / "mydata.tmp.4000000.1"));
  CHECK(remove_stale_temporaries(dir / "absent/x") == 0);
  CHECK(remove_stale_temporaries("") == 0);
}

TEST_CASE("a long target name gets a shortened temporary name that tells it apart", "[safetensors][files]") {
  TempDir dir;
  const std::string a = std::string(230, 'a') + "1", b = std::string(230, 'a') + "2";
  const std::string pa = temporary_prefix(dir / a), pb = temporary_prefix(dir / b);
  CHECK(pa != pb);
  CHECK(pa.size() - dir.path.size() - 1 + 16 <= 255);  // fits a file name with its suffix
  save(dir / a, {{"w", ones({1})}});
  save(dir / b, {{"w", zeros({1})}});
  CHECK(dir.listing() == std::vector<std::string>{a, b});
  CHECK(load(dir / b).at("w").item<double>() == 0.0);
}

TEST_CASE("concurrent saves of one target keep clear of each other's temporaries", "[safetensors][files]") {
  // Two threads saving the same target: each holds its own temporary locked, so neither
  // removes the other's, and both saves succeed.
  TempDir dir;
  const std::string target = dir / "m.safetensors";
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (int k = 0; k < 25; ++k) {
        try {
          save(target, {{"w", full({64}, double(t))}});
        } catch (const Error&) {
          ++failures;
        }
      }
    });
  for (auto& th : threads) th.join();
  CHECK(failures == 0);
  CHECK(dir.listing() == std::vector<std::string>{"m.safetensors"});
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
