// The define-by-run autograd engine: ops record Nodes whose backward is written in
// tensor ops next to the forward (see ops/*.cpp); backward() runs them in reverse
// topological order without recursion, and releases them unless asked to keep them.
#pragma once
#include <functional>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "framework/saved_tensor.h"
#include "framework/tensor.h"

namespace hg {

struct Edge {
  std::shared_ptr<Node> node;  // null: that input needs no gradient
  uint32_t input_nr = 0;       // which output of `node` the gradient flows into
};

struct OutputMeta {
  Shape shape;
  DType dtype = DType::f32;
  Device device;
};

using TensorList = std::vector<Tensor>;

// A loss scale (amp::GradScaler) that gradients carry. The node that scales a loss
// returns it from Node::loss_scale(); backward hands it along with the gradients and
// leaves it on every leaf's .grad the scaled gradient reaches (also when accumulated into
// an existing .grad), as a weak reference: the scaler drops the mark when it unscales an
// optimizer's gradients or updates, so "carries a live mark" means "still multiplied by
// S". Clipping refuses such gradients.
struct LossScaleMark {
  Tensor scale;  // 0-d f32: the S the gradients carry (a copy: the scaler's own changes at update())
};

class Node : public std::enable_shared_from_this<Node> {
 public:
  virtual ~Node();
  // One gradient per output in; one per next edge out (undefined = no gradient).
  virtual TensorList apply(const TensorList& grad_outputs) = 0;
  virtual std::string name() const = 0;
  // Drops what backward needs (saved tensors); later apply() calls throw.
  virtual void release() {}
  // The loss scale the gradients leaving this node carry from here on (null: none added).
  virtual std::shared_ptr<const LossScaleMark> loss_scale() const { return nullptr; }
  // The nn::Module whose forward recorded this node, "" outside any (for messages).
  const std::string& module_path() const;

  std::vector<Edge> next_edges;
  std::vector<OutputMeta> outputs;
  std::vector<OutputMeta> inputs;  // metadata of the inputs the edges lead to
  // Per-output hooks, for tensors that are not leaves.
  std::vector<std::vector<std::pair<int64_t, Tensor::Hook>>> output_hooks;
  // Shared by every node one module forward records (not a string per node).
  std::shared_ptr<const std::string> module_path_ptr;
  bool released = false;
};

// The node behind a leaf that requires grad: adds the incoming gradient to .grad.
class AccumulateGrad : public Node {
 public:
  explicit AccumulateGrad(std::shared_ptr<TensorImpl> leaf) : leaf(std::move(leaf)) {}
  TensorList apply(const TensorList& grads) override;
  std::string name() const override { return "AccumulateGrad"; }
  std::shared_ptr<TensorImpl> leaf;
};

namespace autograd {

using BackwardFn = std::function<TensorList(const TensorList& grad_outputs)>;

bool grad_mode_enabled();
// True when any input requires grad and grad mode is on: the op must record a node.
bool needs_record(std::initializer_list<const Tensor*> inputs);

// Records a node named `name` with backward `fn` making `outputs` depend on `inputs`
// (if recording is needed). fn gets one gradient per output (zeros filled in for
// outputs that got none) and returns one per input.
// `saves_tensors` false marks a node whose backward keeps nothing alive (a Cast): it
// survives graph release, so a cast cached by autocast can be backpropagated again.
void record(const char* name, const TensorList& inputs, const std::vector<Tensor*>& outputs, BackwardFn fn,
            bool saves_tensors = true);
// Single-output convenience: fn(grad) -> one gradient per input.
void record(const char* name, const TensorList& inputs, Tensor& output,
            std::function<TensorList(const Tensor&)> fn, bool saves_tensors = true);
// record() for a loss scaler: the node's gradients carry `mark` (a null or expired mark
// adds none), so every leaf gradient backward reaches from it is marked as scaled.
void record_scaled(const char* name, const Tensor& input, Tensor& output, std::function<TensorList(const Tensor&)> fn,
                   std::weak_ptr<const LossScaleMark> mark);
// The live mark `grad` (a .grad) carries, or null; set_loss_scale moves one onto another
// gradient (amp::MasterWeights copies the model's scaled gradients to its masters) or,
// with null, clears it (unscaling).
std::shared_ptr<const LossScaleMark> loss_scale_of(const Tensor& grad);
void set_loss_scale(const Tensor& grad, const std::shared_ptr<const LossScaleMark>& mark);

// Inside a backward function: whether input i of the running node needs a gradient
// (lets an op skip e.g. the input gradient of a network's first convolution).
bool needs_input_grad(size_t i);
// True while this thread runs a node's backward (the ops it calls are part of backward).
bool in_backward();
// The node whose backward this thread is running, or null.
const Node* running_node();

// Runs backward from `roots` seeded with `grads`.
void backward(const TensorList& roots, const TensorList& grads, bool retain_graph = false);

// Gradients of `outputs` w.r.t. `inputs` without touching any .grad (used by gradcheck).
TensorList grad(const TensorList& outputs, const TensorList& inputs, const TensorList& grad_outputs,
                bool retain_graph = false);

// The module path ops record into their nodes (nn::Module sets it during forward).
const std::string& current_module_path();
class ModulePathScope {
 public:
  explicit ModulePathScope(const std::string& path);  // one shared copy per scope
  ~ModulePathScope();
  ModulePathScope(const ModulePathScope&) = delete;
  ModulePathScope& operator=(const ModulePathScope&) = delete;

 private:
  std::shared_ptr<const std::string> saved_;
};

// Called for every node recorded / every gradient computed; amp's anomaly detection
// and numerics monitor install these. Null when unused.
// The forward observer runs for every op, recorded or not (node is null when not).
using ForwardObserver = void (*)(const char* op, Node* node, const std::vector<Tensor*>& outputs,
                                const TensorList& inputs);
using BackwardObserver = void (*)(Node& node, const TensorList& grad_inputs, const TensorList& grad_outputs);
void set_forward_observer(ForwardObserver f);
void set_backward_observer(BackwardObserver f);

// Prints the graph behind `root`: one line per node with its output dtypes and shapes.
std::string graph_to_string(const Tensor& root);

}  // namespace autograd

// Turns off graph recording in this thread while alive (nestable).
class NoGrad {
 public:
  NoGrad();
  ~NoGrad();
  NoGrad(const NoGrad&) = delete;
  NoGrad& operator=(const NoGrad&) = delete;

 private:
  bool prev_;
};

class EnableGrad {
 public:
  EnableGrad();
  ~EnableGrad();
  EnableGrad(const EnableGrad&) = delete;
  EnableGrad& operator=(const EnableGrad&) = delete;

 private:
  bool prev_;
};

}  // namespace hg
