// How a small training program's time depends on OpenMP's thread settings when other
// processes keep the cores busy: each configuration runs in a fresh child process (OpenMP
// reads its environment once, at start), next to 0, 1 or 2 busy-looping processes,
// interleaved over repeats; the table gives the median wall time per configuration.
//   threads_under_load [--steps N] [--repeats R] [--loads 0,1,2] [--workload mlp|unet]
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "halfgrad.h"
#include "models/unet.h"

using namespace hg;

namespace {

// The measured program: a training loop of small ops (an MLP, as in examples/quickstart)
// or a small U-Net, timed from the first step to the last.
double train_seconds(const std::string& workload, int steps) {
  manual_seed(0);
  const auto t0 = std::chrono::steady_clock::now();
  if (workload == "mlp") {
    Tensor x = randn({1024, 2});
    Tensor y = (sum(square(x), {1}, true) < 1.386).to(f32);
    MLP model(2, {64, 64}, 1);
    optim::Adam opt(model.named_parameters(), {.lr = 0.01});
    for (int i = 0; i < steps; ++i) {
      Tensor loss = bce_with_logits(model(x), y);
      loss.backward();
      opt.step();
      opt.zero_grad();
    }
  } else {
    Tensor x = randn({4, 32, 32, 1});
    Tensor y = randint(0, 4, {4, 32, 32}, {i64});
    UNet model(1, 4, 8, 2);
    optim::Adam opt(model.named_parameters(), {.lr = 1e-3});
    for (int i = 0; i < steps; ++i) {
      Tensor loss = cross_entropy(model(x).reshape({-1, 4}), y.reshape({-1}));
      loss.backward();
      opt.step();
      opt.zero_grad();
    }
  }
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

struct Config {
  std::string name;
  std::vector<std::pair<std::string, std::string>> env;  // set in the child; "" unsets
};

// Runs this program as a child with `env` and returns the seconds it printed (-1 on failure).
double run_child(const char* self, const Config& c, const std::string& workload, int steps) {
  int fd[2];
  if (pipe(fd) != 0) return -1;
  const pid_t pid = fork();
  if (pid == 0) {
    dup2(fd[1], STDOUT_FILENO);
    close(fd[0]);
    for (const auto& [k, v] : c.env) {
      if (v.empty()) unsetenv(k.c_str());
      else setenv(k.c_str(), v.c_str(), 1);
    }
    const std::string s = std::to_string(steps);
    execl(self, self, "--child", workload.c_str(), s.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  close(fd[1]);
  char buf[64] = {};
  const ssize_t n = read(fd[0], buf, sizeof buf - 1);
  close(fd[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  if (n <= 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) return -1;
  return std::atof(buf);
}

// `n` processes that keep a core busy each until stop() kills them.
struct Load {
  std::vector<pid_t> pids;
  explicit Load(int n) {
    for (int i = 0; i < n; ++i) {
      const pid_t pid = fork();
      if (pid == 0) {
        volatile unsigned long spin = 0;
        for (;;) spin = spin + 1;
      }
      pids.push_back(pid);
    }
  }
  ~Load() {
    for (pid_t p : pids) kill(p, SIGKILL);
    for (pid_t p : pids) waitpid(p, nullptr, 0);
  }
};

std::vector<int> parse_list(const std::string& s) {
  std::vector<int> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) out.push_back(std::stoi(item));
  return out;
}

int usage(FILE* to, int rc) {
  std::fprintf(to,
               "usage: threads_under_load [--steps N] [--repeats R] [--loads 0,1,2] [--workload mlp|unet]\n"
               "Times a small training program under OpenMP thread settings (one child process each)\n"
               "while 0, 1, 2... other processes keep cores busy; prints median seconds per setting.\n");
  return rc;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 4 && std::strcmp(argv[1], "--child") == 0) {
    std::printf("%.6f\n", train_seconds(argv[2], std::atoi(argv[3])));
    return 0;
  }
  int steps = 150, repeats = 3;
  std::vector<int> loads{0, 1, 2};
  std::string workload = "mlp";
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--help" || a == "-h") return usage(stdout, 0);
    if (i + 1 >= argc) return usage(stderr, 2);
    const std::string v = argv[++i];
    try {
      if (a == "--steps") steps = std::stoi(v);
      else if (a == "--repeats") repeats = std::stoi(v);
      else if (a == "--loads") loads = parse_list(v);
      else if (a == "--workload" && (v == "mlp" || v == "unet")) workload = v;
      else return usage(stderr, 2);
    } catch (const std::exception&) {
      return usage(stderr, 2);
    }
  }
  const std::vector<Config> configs = {
      {"1 thread", {{"HG_NUM_THREADS", "1"}, {"HG_THREAD_SPIN_US", ""}}},
      {"2 threads, idle threads sleep at once", {{"HG_NUM_THREADS", "2"}, {"HG_THREAD_SPIN_US", "0"}}},
      {"2 threads, idle threads poll 30 us first", {{"HG_NUM_THREADS", "2"}, {"HG_THREAD_SPIN_US", "30"}}},
      {"2 threads, poll 50 us while a core is spare (default)", {{"HG_NUM_THREADS", "2"}, {"HG_THREAD_SPIN_US", ""}}},
      {"2 threads, idle threads poll 1 ms first", {{"HG_NUM_THREADS", "2"}, {"HG_THREAD_SPIN_US", "1000"}}},
      {"nothing set (halfgrad's defaults)", {{"HG_NUM_THREADS", ""}, {"OMP_NUM_THREADS", ""}, {"HG_THREAD_SPIN_US", ""}}},
  };

  std::map<std::pair<int, size_t>, std::vector<double>> times;
  for (int r = 0; r < repeats; ++r)
    for (int load : loads) {
      Load busy(load);
      usleep(100000);  // let the busy processes get their cores
      for (size_t c = 0; c < configs.size(); ++c) times[{load, c}].push_back(run_child(argv[0], configs[c], workload, steps));
    }
  std::printf("workload %s, %d steps, median of %d runs, %ld online CPUs\n\n", workload.c_str(), steps, repeats,
              sysconf(_SC_NPROCESSORS_ONLN));
  std::printf("%-52s", "setting");
  for (int load : loads) std::printf("  %d busy: s", load);
  std::printf("\n");
  for (size_t c = 0; c < configs.size(); ++c) {
    std::printf("%-52s", configs[c].name.c_str());
    for (int load : loads) {
      std::vector<double> t = times[{load, c}];
      std::sort(t.begin(), t.end());
      std::printf("  %10.3f", t[t.size() / 2]);
    }
    std::printf("\n");
  }
  return 0;
}
