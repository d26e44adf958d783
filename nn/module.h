// nn::Module: a tree of named children with parameters and buffers, whose names follow
// module paths ("down2.conv1.weight"). A child is named once in a model's source with
// HG_CHILD, e.g.  HG_CHILD(Conv2d, conv1, 3, 16, 3);
#pragma once
#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "framework/autograd.h"
#include "framework/state_dict.h"
#include "framework/tensor.h"

namespace hg::nn {

class Module;

// Observers of module outputs: the numerics monitor, compare() and the FP32 fallback
// install one on the model they watch; it is called with the output of every module of
// that model's subtree as its forward returns, in the thread that ran the forward.
using OutputObserver = std::function<void(Module& m, const Tensor& output)>;

// A module's own observers. Shared with the handles that installed them, so a handle
// that outlives its module removes nothing; the mutex makes installing and removing safe
// while another thread runs a forward of the same model.
struct ObserverList {
  std::mutex mu;
  std::vector<std::pair<int64_t, std::shared_ptr<const OutputObserver>>> entries;
  std::atomic<size_t> size{0};  // read without the lock: a forward with no observer takes none
  int64_t next_id = 0;
};

// Keeps one observer installed while alive (RAII); reset() or destruction removes it.
class ObserverHandle {
 public:
  ObserverHandle() = default;
  ObserverHandle(std::weak_ptr<ObserverList> list, int64_t id) : list_(std::move(list)), id_(id) {}
  ~ObserverHandle() { reset(); }
  ObserverHandle(ObserverHandle&& o) noexcept : list_(std::move(o.list_)), id_(o.id_) { o.id_ = 0; }
  ObserverHandle& operator=(ObserverHandle&& o) noexcept;
  ObserverHandle(const ObserverHandle&) = delete;
  ObserverHandle& operator=(const ObserverHandle&) = delete;
  void reset();

 private:
  std::weak_ptr<ObserverList> list_;
  int64_t id_ = 0;
};

class Module {
 public:
  Module() = default;
  virtual ~Module() = default;
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  // The single-input forward most layers have: enters this module's Scope, runs
  // forward_impl and hands the output to the observers. forward(x) and (*m)(x) are the same
  // call, so the libtorch habit child->forward(x) cannot bypass the scope. Modules with
  // other signatures define their own operator() whose body runs inside scoped(...).
  Tensor forward(const Tensor& x);
  Tensor operator()(const Tensor& x) { return forward(x); }

  // While alive: ops record this module's path into their graph nodes (for messages,
  // the numerics monitor and anomaly detection), and a precision set with
  // set_precision overrides the autocast compute dtype.
  class Scope {
   public:
    explicit Scope(const Module& m);
    ~Scope();
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    autograd::ModulePathScope path_scope_;
    std::optional<DType> saved_autocast_;
    bool overrode_ = false;
  };

  // Installs `f` on this module: it sees the outputs of this module and of every module
  // below it (a model's monitor sees all its layers and no other model's).
  [[nodiscard]] ObserverHandle add_output_observer(OutputObserver f);

  // Registration, normally through the HG_CHILD / HG_PARAM / HG_BUFFER macros.
  template <class M>
  std::shared_ptr<M> register_module(const std::string& name, std::shared_ptr<M> m) {
    add_child(name, m);
    return m;
  }
  Tensor register_parameter(const std::string& name, Tensor t);  // becomes a leaf that requires grad
  Tensor register_buffer(const std::string& name, Tensor t);

  // Tree queries; names are relative to this module and in registration order.
  std::vector<Tensor> parameters() const;
  std::vector<std::pair<std::string, Tensor>> named_parameters() const;
  std::vector<std::pair<std::string, Tensor>> named_buffers() const;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> named_children() const;
  // Every module below (and including) this one, depth first, with its relative path
  // ("" for this one).
  std::vector<std::pair<std::string, Module*>> named_modules();
  int64_t parameter_count() const;

  // The full path from the root ("" for a root), and the type name ("Conv2d").
  std::string path() const;
  const Module& root() const;
  virtual std::string type_name() const = 0;

  void train(bool on = true);
  void eval() { train(false); }
  bool is_training() const { return training_; }

  // Moves/casts every parameter and buffer in place (existing handles, e.g. in an
  // optimizer, see the change); gradients are dropped. Integer buffers keep their dtype.
  void to(Device device);
  void to(DType dtype);
  void zero_grad();  // drops the gradients (they become undefined)

  // Parameters and buffers by path. load_state_dict copies values in place (casting to
  // each tensor's dtype); strict: missing, unexpected and mis-shaped entries are all
  // reported by name in one hg::Error, and nothing is loaded then.
  StateDict state_dict() const;
  void load_state_dict(const StateDict& sd, bool strict = true);

  // The precision this module's ops run in under autocast (e.g. f32 for a layer that
  // overflows in f16); unset: follow the autocast policy.
  void set_precision(std::optional<DType> dtype) { precision_ = dtype; }
  std::optional<DType> precision() const { return precision_; }

  // A table: one line per parameter/buffer with path, shape, dtype, count; then totals.
  std::string summary() const;

 protected:
  // What a single-input layer computes; override this, call forward() or operator().
  virtual Tensor forward_impl(const Tensor& x);
  // Runs body() inside this module's Scope and hands its result to the output observers:
  // the body of a multi-input operator(), e.g. return scoped([&] { return f(a, b); });
  template <class F>
  Tensor scoped(F&& body) {
    Scope scope(*this);
    return observed(body());
  }

  void add_child(const std::string& name, std::shared_ptr<Module> m);
  // Hands a forward's result to the output observers of this module and of each of its
  // ancestors up to the root (scoped and forward do it).
  Tensor observed(Tensor output);

 private:
  std::vector<std::pair<std::string, Tensor>> params_;
  std::vector<std::pair<std::string, Tensor>> buffers_;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
  const Module* parent_ = nullptr;
  std::string name_;
  bool training_ = true;
  std::optional<DType> precision_;
  std::shared_ptr<ObserverList> observers_ = std::make_shared<ObserverList>();
};

}  // namespace hg::nn

// Declares and registers a child member in one place: HG_CHILD(Conv2d, conv1, args...)
// makes `std::shared_ptr<Conv2d> conv1`, registered as "conv1".
#define HG_CHILD(Type, name, ...) \
  std::shared_ptr<Type> name = this->register_module(#name, std::make_shared<Type>(__VA_ARGS__))
// HG_PARAM(weight, init_tensor) makes `Tensor weight`, registered as parameter "weight".
#define HG_PARAM(name, init) ::hg::Tensor name = this->register_parameter(#name, (init))
#define HG_BUFFER(name, init) ::hg::Tensor name = this->register_buffer(#name, (init))
