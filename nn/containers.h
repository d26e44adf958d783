// ModuleList: children held in order and reached by index, for models that loop over
// their layers themselves (a transformer's blocks). Named "0", "1", ... like Sequential's.
#pragma once
#include <memory>
#include <string>

#include "nn/module.h"

namespace hg::nn {

class ModuleList : public Module {
 public:
  ModuleList() = default;
  template <class... M>
  explicit ModuleList(std::shared_ptr<M>... modules) {
    (push_back(std::move(modules)), ...);
  }
  template <class M>
  std::shared_ptr<M> push_back(std::shared_ptr<M> m) {
    return register_module(std::to_string(size()), std::move(m));
  }
  size_t size() const { return named_children().size(); }
  Module& operator[](size_t i) const { return *child(i); }
  // The i-th child as its own type; hg::Error if it is another type.
  template <class M>
  M& at(size_t i) const {
    auto* m = dynamic_cast<M*>(child(i).get());
    HG_CHECK(m, "ModuleList: module ", i, " is a ", child(i)->type_name(), ", not the type asked for");
    return *m;
  }
  std::string type_name() const override { return "ModuleList"; }

 private:
  std::shared_ptr<Module> child(size_t i) const {
    auto children = named_children();
    HG_CHECK(i < children.size(), "ModuleList: index ", i, " out of range for ", children.size(), " modules");
    return children[i].second;
  }
};

}  // namespace hg::nn
