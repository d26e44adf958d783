// The registry behind grad_ready.h: hooks keyed by the leaf's TensorImpl, looked up
// only when any hook exists (an atomic count keeps plain training free of the lock).
#include "framework/grad_ready.h"

#include <atomic>
#include <mutex>
#include <unordered_map>
#include <utility>
#include <vector>

#include "framework/error.h"

namespace hg::autograd {

namespace {
struct Registry {
  std::mutex mu;
  std::unordered_map<const TensorImpl*, std::vector<std::pair<int64_t, GradReadyHook>>> by_leaf;
  std::atomic<size_t> count{0};
  int64_t next_id = 1;
};
Registry& registry() {
  static Registry r;
  return r;
}
}  // namespace

int64_t add_grad_ready_hook(const Tensor& leaf, GradReadyHook hook) {
  HG_CHECK(leaf.defined() && leaf.requires_grad() && leaf.is_leaf(),
           "add_grad_ready_hook: the tensor must be a leaf that requires grad (a parameter)");
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  int64_t id = r.next_id++;
  r.by_leaf[leaf.impl()].emplace_back(id, std::move(hook));
  r.count.fetch_add(1);
  return id;
}

void remove_grad_ready_hook(int64_t handle) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  for (auto it = r.by_leaf.begin(); it != r.by_leaf.end(); ++it) {
    auto n = std::erase_if(it->second, [handle](auto& h) { return h.first == handle; });
    if (n == 0) continue;
    r.count.fetch_sub(n);
    if (it->second.empty()) r.by_leaf.erase(it);
    return;
  }
}

namespace detail {
void notify_grad_ready(const std::shared_ptr<TensorImpl>& leaf) {
  Registry& r = registry();
  if (r.count.load() == 0) return;
  std::vector<GradReadyHook> hooks;
  {
    std::lock_guard<std::mutex> lock(r.mu);
    auto it = r.by_leaf.find(leaf.get());
    if (it == r.by_leaf.end()) return;
    for (auto& [id, h] : it->second) hooks.push_back(h);
  }
  Tensor t(leaf);
  for (auto& h : hooks) h(t);
}
}  // namespace detail

}  // namespace hg::autograd
