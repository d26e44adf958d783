// The autograd engine: recording nodes, the iterative backward pass, graph release
// and iterative node destruction (a 100,000-op chain must not overflow the stack).
#include "framework/autograd.h"

#include <algorithm>
#include <atomic>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

#include "framework/profiler_hook.h"
#include "framework/grad_ready.h"
#include "ops/elementwise.h"

namespace hg {

namespace {
thread_local bool t_grad_enabled = true;
thread_local Node* t_running_node = nullptr;
thread_local std::vector<bool>* t_running_needs = nullptr;
thread_local std::shared_ptr<const std::string> t_module_path;
// The loss-scale mark of the gradient the running node got (read by AccumulateGrad).
thread_local const std::shared_ptr<const LossScaleMark>* t_running_mark = nullptr;
const std::string kNoPath;
autograd::ForwardObserver g_forward_observer = nullptr;
autograd::BackwardObserver g_backward_observer = nullptr;

// A node whose backward is a closure written next to its op's forward.
class FunctionNode : public Node {
 public:
  FunctionNode(const char* name, autograd::BackwardFn fn, bool saves_tensors)
      : name_(name), fn_(std::move(fn)), saves_tensors_(saves_tensors) {}
  TensorList apply(const TensorList& grads) override {
    HG_CHECK(!released, "backward of ", name_,
             ": the graph was already released by an earlier backward(); to run backward through it "
             "again, keep it in the first call: y.backward({.retain_graph = true}) (with a gradient: "
             "y.backward(grad, {.retain_graph = true}))");
    return fn_(grads);
  }
  std::string name() const override { return name_; }
  void release() override {
    if (!saves_tensors_) return;
    fn_ = nullptr;
    released = true;
  }

 private:
  const char* name_;
  autograd::BackwardFn fn_;
  bool saves_tensors_;
};

// A scaled loss's node: its gradients carry the scaler's mark from here to the leaves.
class ScaledFunctionNode : public FunctionNode {
 public:
  ScaledFunctionNode(const char* name, autograd::BackwardFn fn, std::weak_ptr<const LossScaleMark> mark)
      : FunctionNode(name, std::move(fn), true), mark_(std::move(mark)) {}
  std::shared_ptr<const LossScaleMark> loss_scale() const override { return mark_.lock(); }

 private:
  std::weak_ptr<const LossScaleMark> mark_;
};

std::shared_ptr<Node> grad_accumulator(const Tensor& leaf) {
  TensorImpl* impl = leaf.impl();
  if (auto acc = impl->grad_accumulator.lock()) return acc;
  auto acc = std::make_shared<AccumulateGrad>(leaf.impl_ptr());
  impl->grad_accumulator = acc;
  return acc;
}

Edge edge_of(const Tensor& t) {
  if (!t.defined() || !t.requires_grad()) return {};
  if (t.grad_fn()) return {t.grad_fn(), t.impl()->output_nr};
  return {grad_accumulator(t), 0};
}

OutputMeta meta_of(const Tensor& t) { return {t.shape(), t.dtype(), t.device()}; }

Tensor run_hooks(const std::vector<std::pair<int64_t, Tensor::Hook>>& hooks, Tensor g) {
  for (auto& [id, h] : hooks) {
    Tensor r = h(g);
    if (r.defined()) g = r;
  }
  return g;
}
}  // namespace

Node::~Node() {
  // Children whose last owner is this node would be destroyed recursively; instead
  // the outermost destructor drains them from a stack.
  thread_local bool draining = false;
  thread_local std::vector<std::shared_ptr<Node>> pending;
  for (auto& e : next_edges)
    if (e.node) pending.push_back(std::move(e.node));
  if (draining) return;
  draining = true;
  while (!pending.empty()) {
    std::shared_ptr<Node> n = std::move(pending.back());
    pending.pop_back();
  }
  draining = false;
}

const std::string& Node::module_path() const { return module_path_ptr ? *module_path_ptr : kNoPath; }

TensorList AccumulateGrad::apply(const TensorList& grads) {
  Tensor g = run_hooks(leaf->hooks, grads[0]);
  Tensor& cur = leaf->grad;
  std::weak_ptr<const LossScaleMark> mark;
  if (!cur.defined()) {
    // A fresh copy: the incoming gradient may be shared with other inputs, and the
    // optimizer and scaler modify .grad in place.
    cur = g.detach().clone();
  } else {
    mark = cur.impl()->loss_scale;  // a scaled sum stays scaled when more is added
    cur = add(cur, g.to(cur.dtype())).detach();
  }
  if (t_running_mark && *t_running_mark) mark = *t_running_mark;
  cur.impl()->loss_scale = std::move(mark);
  autograd::detail::notify_grad_ready(leaf);
  return {};
}

namespace autograd {

bool grad_mode_enabled() { return t_grad_enabled; }

bool needs_record(std::initializer_list<const Tensor*> inputs) {
  if (!t_grad_enabled) return false;
  for (const Tensor* t : inputs)
    if (t->defined() && t->requires_grad()) return true;
  return false;
}

namespace {
// record()'s body; make() builds the node when one must be recorded.
template <class Make>
void record_with(const char* name, const TensorList& inputs, const std::vector<Tensor*>& outputs, Make make) {
  bool rec = false;
  if (t_grad_enabled)
    for (const Tensor& t : inputs) rec = rec || (t.defined() && t.requires_grad());
  std::shared_ptr<Node> node;
  if (rec) {
    node = make();
    for (const Tensor& t : inputs) {
      node->next_edges.push_back(edge_of(t));
      node->inputs.push_back(t.defined() ? meta_of(t) : OutputMeta{});
    }
    node->module_path_ptr = t_module_path;
    node->output_hooks.resize(outputs.size());
    for (uint32_t i = 0; i < outputs.size(); ++i) {
      TensorImpl* o = outputs[i]->impl();
      node->outputs.push_back(meta_of(*outputs[i]));
      if (!is_floating(o->dtype)) continue;  // integer outputs (argmax) carry no gradient
      o->grad_fn = node;
      o->output_nr = i;
      o->requires_grad = true;
    }
  }
  if (g_forward_observer) g_forward_observer(name, node.get(), outputs, inputs);
}
}  // namespace

void record(const char* name, const TensorList& inputs, const std::vector<Tensor*>& outputs, BackwardFn fn,
            bool saves_tensors) {
  record_with(name, inputs, outputs,
              [&] { return std::make_shared<FunctionNode>(name, std::move(fn), saves_tensors); });
}

void record_scaled(const char* name, const Tensor& input, Tensor& output, std::function<TensorList(const Tensor&)> fn,
                   std::weak_ptr<const LossScaleMark> mark) {
  record_with(name, {input}, {&output}, [&] {
    return std::make_shared<ScaledFunctionNode>(
        name, [fn = std::move(fn)](const TensorList& g) { return fn(g[0]); }, std::move(mark));
  });
}

std::shared_ptr<const LossScaleMark> loss_scale_of(const Tensor& grad) {
  return grad.defined() ? grad.impl()->loss_scale.lock() : nullptr;
}

void set_loss_scale(const Tensor& grad, const std::shared_ptr<const LossScaleMark>& mark) {
  HG_CHECK(grad.defined(), "set_loss_scale: the gradient is an undefined tensor");
  grad.impl()->loss_scale = mark;
}

void record(const char* name, const TensorList& inputs, Tensor& output, std::function<TensorList(const Tensor&)> fn,
            bool saves_tensors) {
  record(name, inputs, std::vector<Tensor*>{&output},
         [fn = std::move(fn)](const TensorList& g) { return fn(g[0]); }, saves_tensors);
}

bool needs_input_grad(size_t i) {
  return t_running_needs == nullptr || (i < t_running_needs->size() && (*t_running_needs)[i]);
}

bool in_backward() { return t_running_node != nullptr; }
const Node* running_node() { return t_running_node; }

const std::string& current_module_path() { return t_module_path ? *t_module_path : kNoPath; }
ModulePathScope::ModulePathScope(const std::string& path) : saved_(std::move(t_module_path)) {
  t_module_path = path.empty() ? nullptr : std::make_shared<const std::string>(path);
}
ModulePathScope::~ModulePathScope() { t_module_path = std::move(saved_); }

void set_forward_observer(ForwardObserver f) { g_forward_observer = f; }
void set_backward_observer(BackwardObserver f) { g_backward_observer = f; }

namespace {

struct Engine {
  std::unordered_map<Node*, int> deps;
  std::unordered_map<Node*, TensorList> buffers;
  // The loss-scale marks the buffered gradients carry (only marked ones are here).
  std::unordered_map<Node*, std::shared_ptr<const LossScaleMark>> marks;
  std::vector<std::shared_ptr<Node>> ready;
  // When set, gradients reaching these (node, input_nr) are captured instead of accumulated.
  std::unordered_map<Node*, size_t>* capture = nullptr;
  TensorList* captured = nullptr;

  void count_dependencies(const std::vector<std::shared_ptr<Node>>& roots) {
    std::vector<Node*> stack;
    std::unordered_set<Node*> seen;
    for (auto& r : roots)
      if (seen.insert(r.get()).second) stack.push_back(r.get());
    while (!stack.empty()) {
      Node* n = stack.back();
      stack.pop_back();
      for (auto& e : n->next_edges) {
        if (!e.node) continue;
        deps[e.node.get()]++;
        if (seen.insert(e.node.get()).second) stack.push_back(e.node.get());
      }
    }
  }

  void add_grad(const std::shared_ptr<Node>& node, uint32_t slot, const Tensor& g) {
    TensorList& buf = buffers[node.get()];
    if (buf.empty()) buf.resize(std::max<size_t>(node->outputs.size(), 1));
    Tensor& cur = buf[slot];
    cur = cur.defined() ? add(cur, g) : g;
  }

  void run(bool retain_graph) {
    NoGrad no_grad;
    while (!ready.empty()) {
      std::shared_ptr<Node> node = std::move(ready.back());
      ready.pop_back();
      TensorList grads = std::move(buffers[node.get()]);
      buffers.erase(node.get());
      std::shared_ptr<const LossScaleMark> mark = node->loss_scale();
      if (!marks.empty()) {
        auto it = marks.find(node.get());
        if (it != marks.end()) {
          if (!mark) mark = std::move(it->second);
          marks.erase(it);
        }
      }
      grads.resize(std::max<size_t>(node->outputs.size(), 1));
      for (size_t i = 0; i < node->outputs.size(); ++i) {
        if (!grads[i].defined()) {
          const OutputMeta& m = node->outputs[i];
          grads[i] = zeros(m.shape, {m.dtype, m.device});
        }
        if (i < node->output_hooks.size()) grads[i] = run_hooks(node->output_hooks[i], grads[i]);
      }
      if (capture) {
        auto it = capture->find(node.get());
        if (it != capture->end()) (*captured)[it->second] = grads[0];
      }
      TensorList out;
      if (!capture || !dynamic_cast<AccumulateGrad*>(node.get())) {
        std::vector<bool> needs;
        for (auto& e : node->next_edges) needs.push_back(e.node != nullptr);
        Node* prev_node = t_running_node;
        auto* prev_needs = t_running_needs;
        auto* prev_mark = t_running_mark;
        t_running_node = node.get();
        t_running_needs = &needs;
        t_running_mark = &mark;
        try {
          profiler_hook::NodeScope profiled(*node);
          out = node->apply(grads);
        } catch (...) {
          t_running_node = prev_node;
          t_running_needs = prev_needs;
          t_running_mark = prev_mark;
          throw;
        }
        t_running_node = prev_node;
        t_running_needs = prev_needs;
        t_running_mark = prev_mark;
        if (g_backward_observer) g_backward_observer(*node, out, grads);
      }
      if (!retain_graph) node->release();
      for (size_t i = 0; i < node->next_edges.size(); ++i) {
        const Edge& e = node->next_edges[i];
        if (!e.node) continue;
        if (i < out.size() && out[i].defined()) {
          Tensor g = out[i];
          const OutputMeta& m = node->inputs[i];
          HG_CHECK(g.shape() == m.shape, "backward of ", node->name(), " returned a gradient of shape ",
                   shape_str(g.shape()), " for input ", i, " of shape ", shape_str(m.shape),
                   " (an internal error in that op's backward)");
          if (g.dtype() != m.dtype) g = g.to(m.dtype);
          add_grad(e.node, e.input_nr, g);
          if (mark) marks.emplace(e.node.get(), mark);
        }
        if (--deps[e.node.get()] == 0) {
          if (buffers.count(e.node.get())) ready.push_back(e.node);
          else skip_subgraph(e.node, retain_graph);
        }
      }
    }
  }

  // A node that received no gradient at all: its inputs get none from it either.
  void skip_subgraph(const std::shared_ptr<Node>& start, bool retain_graph) {
    std::vector<std::shared_ptr<Node>> stack{start};
    while (!stack.empty()) {
      auto n = std::move(stack.back());
      stack.pop_back();
      if (!retain_graph) n->release();
      for (auto& e : n->next_edges) {
        if (!e.node) continue;
        if (--deps[e.node.get()] == 0) {
          if (buffers.count(e.node.get())) ready.push_back(e.node);
          else stack.push_back(e.node);
        }
      }
    }
  }

  void seed(const TensorList& roots, const TensorList& grads, std::vector<std::shared_ptr<Node>>& nodes) {
    HG_CHECK(roots.size() == grads.size(), "backward: got ", roots.size(), " tensors but ", grads.size(),
             " gradients");
    for (size_t i = 0; i < roots.size(); ++i) {
      const Tensor& r = roots[i];
      HG_CHECK(r.defined(), "backward: tensor ", i, " is undefined");
      HG_CHECK(r.requires_grad(), "backward: tensor ", i, " (shape ", shape_str(r.shape()), ", ",
               dtype_name(r.dtype()),
               ") does not require grad and has no grad_fn; nothing it was computed from requires grad "
               "(set requires_grad on the inputs, and check no NoGrad guard was active)");
      const Tensor& g = grads[i];
      HG_CHECK(g.defined() && g.shape() == r.shape(), "backward: the gradient for a tensor of shape ",
               shape_str(r.shape()), " must have the same shape, got ",
               g.defined() ? shape_str(g.shape()) : std::string("an undefined tensor"));
      Edge e = edge_of(r);
      add_grad(e.node, e.input_nr, g.to(r.dtype()));
      nodes.push_back(e.node);
    }
  }
};

}  // namespace

void backward(const TensorList& roots, const TensorList& grads, bool retain_graph) {
  Engine eng;
  std::vector<std::shared_ptr<Node>> nodes;
  eng.seed(roots, grads, nodes);
  eng.count_dependencies(nodes);
  for (auto& n : nodes)
    if (eng.deps[n.get()] == 0 && std::find(eng.ready.begin(), eng.ready.end(), n) == eng.ready.end())
      eng.ready.push_back(n);
  eng.run(retain_graph);
}

TensorList grad(const TensorList& outputs, const TensorList& inputs, const TensorList& grad_outputs,
                bool retain_graph) {
  Engine eng;
  std::unordered_map<Node*, size_t> capture;
  TensorList captured(inputs.size());
  std::vector<std::shared_ptr<Node>> keep;
  for (size_t i = 0; i < inputs.size(); ++i) {
    HG_CHECK(inputs[i].requires_grad() && inputs[i].is_leaf(),
             "autograd::grad: input ", i, " must be a leaf that requires grad");
    keep.push_back(grad_accumulator(inputs[i]));
    capture[keep.back().get()] = i;
  }
  eng.capture = &capture;
  eng.captured = &captured;
  std::vector<std::shared_ptr<Node>> nodes;
  eng.seed(outputs, grad_outputs, nodes);
  eng.count_dependencies(nodes);
  for (auto& n : nodes)
    if (eng.deps[n.get()] == 0 && std::find(eng.ready.begin(), eng.ready.end(), n) == eng.ready.end())
      eng.ready.push_back(n);
  eng.run(retain_graph);
  for (size_t i = 0; i < inputs.size(); ++i)
    if (!captured[i].defined()) captured[i] = zeros_like(inputs[i]);
  return captured;
}

std::string graph_to_string(const Tensor& root) {
  std::ostringstream os;
  if (!root.grad_fn()) {
    os << "(leaf " << dtype_name(root.dtype()) << shape_str(root.shape()) << ")\n";
    return os.str();
  }
  // Depth-first from the root, iteratively, each node once.
  std::vector<std::pair<Node*, int>> stack{{root.grad_fn().get(), 0}};
  std::unordered_set<Node*> seen;
  while (!stack.empty()) {
    auto [n, depth] = stack.back();
    stack.pop_back();
    os << std::string(2 * depth, ' ') << n->name();
    if (!n->module_path().empty()) os << " [" << n->module_path() << "]";
    os << " ->";
    for (auto& m : n->outputs) os << " " << dtype_name(m.dtype) << shape_str(m.shape);
    if (!seen.insert(n).second) {
      os << " (see above)\n";
      continue;
    }
    os << "\n";
    for (size_t i = n->next_edges.size(); i-- > 0;) {
      auto& e = n->next_edges[i];
      if (!e.node) continue;
      if (auto* acc = dynamic_cast<AccumulateGrad*>(e.node.get())) {
        os << std::string(2 * depth + 2, ' ') << "param " << (acc->leaf->name.empty() ? "?" : acc->leaf->name)
           << " " << dtype_name(acc->leaf->dtype) << shape_str(acc->leaf->shape) << "\n";
        continue;
      }
      stack.push_back({e.node.get(), depth + 1});
    }
  }
  return os.str();
}

}  // namespace autograd

static int64_t next_hook_id() {
  static std::atomic<int64_t> id{0};
  return ++id;
}

bool Tensor::requires_grad() const { return live("requires_grad").requires_grad; }
bool Tensor::is_leaf() const { return live("is_leaf").grad_fn == nullptr; }
const Tensor& Tensor::grad() const { return live("grad").grad; }
Tensor& Tensor::mutable_grad() { return live("mutable_grad").grad; }
void Tensor::set_grad(const Tensor& g) const { live("set_grad").grad = g; }
const std::shared_ptr<Node>& Tensor::grad_fn() const { return live("grad_fn").grad_fn; }

Tensor& Tensor::set_requires_grad(bool r) {
  live("set_requires_grad");
  HG_CHECK(is_leaf(), "set_requires_grad: only leaf tensors can change requires_grad; this tensor is the output of ",
           impl_->grad_fn->name(), " (use detach() to make a leaf)");
  HG_CHECK(!r || is_floating(dtype()), "set_requires_grad: only floating tensors can require grad, this one is ",
           dtype_name(dtype()));
  impl_->requires_grad = r;
  return *this;
}

int64_t Tensor::register_hook(Hook hook) const {
  live("register_hook");
  HG_CHECK(requires_grad(), "register_hook: the tensor does not require grad, so no gradient will reach a hook");
  int64_t id = next_hook_id();
  if (is_leaf()) {
    impl_->hooks.emplace_back(id, std::move(hook));
  } else {
    impl_->grad_fn->output_hooks[impl_->output_nr].emplace_back(id, std::move(hook));
  }
  return id;
}

void Tensor::remove_hook(int64_t handle) const {
  live("remove_hook");
  auto drop = [handle](std::vector<std::pair<int64_t, Hook>>& hooks) {
    std::erase_if(hooks, [handle](auto& h) { return h.first == handle; });
  };
  if (is_leaf()) {
    drop(impl_->hooks);
  } else {
    drop(impl_->grad_fn->output_hooks[impl_->output_nr]);
  }
}

void Tensor::retain_grad() const {
  live("retain_grad");
  HG_CHECK(requires_grad(), "retain_grad: the tensor does not require grad");
  if (is_leaf() || impl_->retains_grad) return;
  impl_->retains_grad = true;
  std::weak_ptr<TensorImpl> weak = impl_;
  register_hook([weak](const Tensor& g) {
    if (auto t = weak.lock()) t->grad = t->grad.defined() ? add(t->grad, g).detach() : g.detach().clone();
    return Tensor();
  });
}

void Tensor::backward(BackwardOptions options) const {
  live("backward");
  HG_CHECK(numel() == 1, "backward(): implicit gradient needs a one-element tensor, got shape ", shape_str(shape()),
           "; pass a gradient: backward(grad)");
  backward(ones(shape(), {dtype(), device()}), options.retain_graph);
}

void Tensor::backward(const Tensor& grad, BackwardOptions options) const { backward(grad, options.retain_graph); }

void Tensor::backward(const Tensor& grad, bool retain_graph) const {
  live("backward");
  autograd::backward({*this}, {grad}, retain_graph);
}

Tensor Tensor::detach() const {
  live("detach");
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = impl_->storage;
  impl->shape = impl_->shape;
  impl->strides = impl_->strides;
  impl->offset = impl_->offset;
  impl->dtype = impl_->dtype;
  impl->name = impl_->name;
  return Tensor(std::move(impl));
}

NoGrad::NoGrad() : prev_(t_grad_enabled) { t_grad_enabled = false; }
NoGrad::~NoGrad() { t_grad_enabled = prev_; }
EnableGrad::EnableGrad() : prev_(t_grad_enabled) { t_grad_enabled = true; }
EnableGrad::~EnableGrad() { t_grad_enabled = prev_; }

}  // namespace hg
