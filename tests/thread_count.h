// Sets halfgrad's CPU thread count for a scope (tests that compare results at 1 and 2 threads).
#pragma once
#include "framework/cpu/threads.h"

namespace hg::test {

class Threads {
 public:
  explicit Threads(int n) : saved_(hg::num_threads()) { hg::set_num_threads(n); }
  ~Threads() { hg::set_num_threads(saved_); }
  Threads(const Threads&) = delete;
  Threads& operator=(const Threads&) = delete;

 private:
  int saved_;
};

}  // namespace hg::test
