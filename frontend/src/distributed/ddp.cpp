// DistributedDataParallel: parameter consistency check, rank-0 broadcast, and the reducer
// that all-reduces bucketed gradients while backward runs.
//
// The reducer's life in one synchronized backward:
//   1. the first gradient hook of the backward resets every bucket's count and queues
//      finalize() to run when the backward ends;
//   2. each hook marks its parameter ready; a bucket whose parameters are all ready is
//      copied into its flat buffer and its all-reduce (avg) is queued on the group's
//      communication thread — buckets launch strictly in order, so every rank issues the
//      same collectives in the same order even if hooks fire in a different order;
//   3. finalize() checks every bucket launched (else names the parameters that got no
//      gradient), waits for the reductions and copies the averages back into .grad.
#include "kiln/distributed/ddp.h"

#include <algorithm>
#include <atomic>
#include <sstream>
#include <unordered_set>

#include "kiln/distributed/init.h"
#include "kiln/error.h"
#include "kiln/tensor_ops/factory.h"
#include "kiln/tensor_ops/layout.h"
#include "kiln/tensor_ops/view.h"

namespace kiln::distributed {
namespace {

using Clock = std::chrono::steady_clock;

// One collective per dtype for a list of tensors: flatten, broadcast from `root`, copy back.
void broadcast_coalesced(ProcessGroup& group, const std::vector<Tensor>& tensors, int root) {
  NoGradGuard no_grad;
  std::vector<DType> dtypes;
  for (const Tensor& t : tensors)
    if (t.defined() && std::find(dtypes.begin(), dtypes.end(), t.dtype()) == dtypes.end()) dtypes.push_back(t.dtype());
  for (DType dtype : dtypes) {
    std::vector<Tensor> parts;
    for (const Tensor& t : tensors)
      if (t.defined() && t.dtype() == dtype) parts.push_back(t.reshape({-1}));
    Tensor flat = cat(parts, 0).contiguous();
    group.broadcast(flat, root);
    int64_t offset = 0;
    for (Tensor t : tensors) {  // a handle: copy_ writes the caller's tensor
      if (!t.defined() || t.dtype() != dtype) continue;
      t.copy_(flat.narrow(0, offset, t.numel()).reshape(t.sizes()));
      offset += t.numel();
    }
  }
}

// "fc1.weight float32[64, 784] grad" lines, one per parameter.
std::string describe_parameters(const nn::NamedTensors& params) {
  std::ostringstream os;
  for (const auto& [name, t] : params) os << name << " " << t.type_str() << (t.requires_grad() ? " grad" : "") << "\n";
  return os.str();
}

std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream is(text);
  for (std::string line; std::getline(is, line);) lines.push_back(line);
  return lines;
}

// Every rank publishes its parameter list; every rank compares all lists against rank 0's,
// so all ranks raise the same error.
void check_same_parameters(ProcessGroup& group, const nn::NamedTensors& params, int instance) {
  std::string key = "ddp/" + std::to_string(instance) + "/parameters/";
  group.store().set(key + std::to_string(group.rank()), describe_parameters(params));
  std::vector<std::string> lists;
  for (int r = 0; r < group.size(); ++r) lists.push_back(group.store().get(key + std::to_string(r), group.timeout()));
  std::vector<std::string> reference = split_lines(lists[0]);
  for (int r = 1; r < group.size(); ++r) {
    if (lists[r] == lists[0]) continue;
    std::vector<std::string> other = split_lines(lists[r]);
    size_t i = 0;
    while (i < reference.size() && i < other.size() && reference[i] == other[i]) ++i;
    std::string mine = i < reference.size() ? "'" + reference[i] + "'" : "nothing (it has " +
                       std::to_string(reference.size()) + " parameters)";
    std::string theirs = i < other.size() ? "'" + other[i] + "'" : "nothing (it has " +
                         std::to_string(other.size()) + " parameters)";
    KILN_FAIL("DistributedDataParallel: rank 0 and rank ", r, " have different parameters; the first difference is "
              "parameter #", i, ": rank 0 has ", mine, ", rank ", r, " has ", theirs, ". Fix: build the same model "
              "(same classes, sizes, order and requires_grad) on every rank before wrapping it.");
  }
}

std::atomic<int> ddp_instances{0};

}  // namespace

struct DistributedDataParallel::Reducer {
  struct Bucket {
    DType dtype = DType::Float32;
    std::vector<size_t> params;   // indices into Reducer::params
    std::vector<int64_t> offsets; // element offset of each in `flat`
    int64_t numel = 0;
    Tensor flat;
    size_t pending = 0;
    Work work;
    BucketEvent event;
  };

  ProcessGroup& group;
  bool find_unused;
  std::vector<std::string> names;
  std::vector<Tensor> params;
  Device device = kCPU;  // the parameters' (and so the buckets')
  std::vector<const autograd::Node*> accumulators;
  std::vector<size_t> bucket_of;
  std::vector<Bucket> buckets;
  std::vector<GradHookHandle> hooks;
  std::vector<bool> ready;
  std::vector<bool> used_locally;  // find_unused: reached from this forward's outputs
  bool in_backward = false;
  bool sync = true;
  size_t next_launch = 0;
  BackwardTimeline timeline, last_timeline;

  Reducer(ProcessGroup& g, const nn::NamedTensors& named, const DistributedDataParallelOptions& o)
      : group(g), find_unused(o.find_unused_parameters) {
    for (const auto& [name, t] : named) {
      if (!t.requires_grad()) continue;
      names.push_back(name);
      params.push_back(t);
      device = t.device();
    }
    build_buckets(o);
    for (size_t i = 0; i < params.size(); ++i) {
      hooks.push_back(register_post_accumulate_grad_hook(params[i], [this, i](const Tensor&) { on_ready(i); }));
      accumulators.push_back(autograd::gradient_edge(params[i]).node.get());
    }
    ready.assign(params.size(), false);
    used_locally.assign(params.size(), true);
  }

  // Reverse registration order. As in PyTorch, a bucket closes once it holds the cap or more
  // (the parameter that crosses the cap stays in it), and at each dtype change.
  void build_buckets(const DistributedDataParallelOptions& o) {
    bucket_of.assign(params.size(), 0);
    bool open = false;
    for (size_t k = params.size(); k-- > 0;) {
      const Tensor& p = params[k];
      if (!open || buckets.back().dtype != p.dtype()) {
        buckets.emplace_back();
        buckets.back().dtype = p.dtype();
        buckets.back().event.bucket = static_cast<int>(buckets.size() - 1);
        open = true;
      }
      Bucket& b = buckets.back();
      b.params.push_back(k);
      b.offsets.push_back(b.numel);
      b.numel += p.numel();
      bucket_of[k] = buckets.size() - 1;
      double cap_mb = buckets.size() == 1 ? o.first_bucket_cap_mb : o.bucket_cap_mb;
      if (static_cast<double>(b.numel * p.element_size()) >= cap_mb * 1024 * 1024) open = false;
    }
  }

  void start_backward() {
    in_backward = true;
    next_launch = 0;
    std::fill(ready.begin(), ready.end(), false);
    for (Bucket& b : buckets) b.pending = b.params.size();
    timeline = {};
    queue_backward_callback([this] { finalize(); });
    // Parameters this forward did not use will get no hook: count them now.
    if (find_unused)
      for (size_t i = 0; i < params.size(); ++i)
        if (!used_locally[i]) mark_ready(i);
  }

  void on_ready(size_t i) {
    if (!sync) return;  // inside no_sync(): gradients accumulate locally
    if (!in_backward) start_backward();
    timeline.last_gradient = Clock::now();
    if (ready[i]) return;  // find_unused counted it, yet a gradient came: it is in the sum already
    mark_ready(i);
  }

  void mark_ready(size_t i) {
    ready[i] = true;
    Bucket& b = buckets[bucket_of[i]];
    if (--b.pending == 0) launch_in_order();
  }

  void launch_in_order() {
    while (next_launch < buckets.size() && buckets[next_launch].pending == 0) launch(buckets[next_launch++]);
  }

  void launch(Bucket& b) {
    NoGradGuard no_grad;
    if (!b.flat.defined()) b.flat = zeros({b.numel}, TensorOptions(b.dtype).with_device(device));
    for (size_t j = 0; j < b.params.size(); ++j) {
      const Tensor& p = params[b.params[j]];
      Tensor slot = b.flat.narrow(0, b.offsets[j], p.numel());
      Tensor g = p.grad();
      if (g.defined() && used_locally[b.params[j]]) {
        slot.copy_(g.reshape({-1}));
      } else {
        slot.zero_();
      }
    }
    b.event.ready = Clock::now();
    b.work = group.all_reduce(b.flat, ReduceOp::Avg, {.async_op = true});
  }

  // The end of a synchronized backward: all buckets reduced and written back.
  void finalize() {
    in_backward = false;
    std::vector<size_t> missing;
    for (size_t i = 0; i < params.size(); ++i)
      if (!ready[i]) missing.push_back(i);
    // Wait for what was launched before reporting anything, so no reduction is left running.
    for (size_t k = 0; k < next_launch; ++k) buckets[k].work.wait();
    if (!missing.empty()) {
      std::ostringstream os;
      os << "'" << names[missing[0]] << "'";
      for (size_t k = 1; k < missing.size() && k < 4; ++k) os << ", '" << names[missing[k]] << "'";
      if (missing.size() > 4) os << " and " << missing.size() - 4 << " more";
      KILN_FAIL("DistributedDataParallel: on rank ", group.rank(), " this backward produced no gradient for ",
                missing.size(), " parameter", missing.size() > 1 ? "s " : " ", os.str(), ", so ",
                missing.size() > 1 ? "their buckets" : "its bucket", " could not be reduced. Fix: if the forward "
                "legitimately skips them in some steps, pass {.find_unused_parameters = true}; if they are never "
                "used, remove them or call requires_grad_(false) on them before wrapping the model.");
    }
    std::vector<bool> used_anywhere(params.size(), true);
    if (find_unused) used_anywhere = reduce_used_flags();
    NoGradGuard no_grad;
    for (size_t k = 0; k < buckets.size(); ++k) {
      Bucket& b = buckets[k];
      for (size_t j = 0; j < b.params.size(); ++j) {
        size_t i = b.params[j];
        if (!used_anywhere[i]) continue;  // no rank used it: .grad stays as it was, as in PyTorch
        Tensor& p = params[i];
        Tensor avg = b.flat.narrow(0, b.offsets[j], p.numel()).reshape(p.sizes());
        Tensor g = p.grad();
        if (g.defined()) {
          g.copy_(avg);
        } else {
          p.set_grad(avg.clone());
        }
      }
      b.event.started = b.work.started_at();
      b.event.finished = b.work.finished_at();
      timeline.buckets.push_back(b.event);
    }
    timeline.backward_end = Clock::now();
    last_timeline = timeline;
  }

  // find_unused: which parameters some rank used (an any-reduction of the local flags).
  std::vector<bool> reduce_used_flags() {
    std::vector<int32_t> local(params.size());
    for (size_t i = 0; i < params.size(); ++i) local[i] = used_locally[i] ? 1 : 0;
    Tensor flags = Tensor::from_vector(local, {static_cast<int64_t>(local.size())}).to(device);
    group.all_reduce(flags, ReduceOp::Max);
    std::vector<int32_t> any = flags.to_vector<int32_t>();
    return std::vector<bool>(any.begin(), any.end());
  }

  // find_unused: walk the autograd graph from the forward's outputs to the accumulators.
  void find_used(const std::vector<Tensor>& outputs) {
    std::unordered_set<const autograd::Node*> seen;
    std::vector<const autograd::Node*> stack;
    for (const Tensor& t : outputs) {
      autograd::Edge e = autograd::gradient_edge(t);
      if (e.valid() && seen.insert(e.node.get()).second) stack.push_back(e.node.get());
    }
    while (!stack.empty()) {
      const autograd::Node* n = stack.back();
      stack.pop_back();
      for (const autograd::Edge& e : n->next_edges)
        if (e.valid() && seen.insert(e.node.get()).second) stack.push_back(e.node.get());
    }
    for (size_t i = 0; i < params.size(); ++i) used_locally[i] = seen.count(accumulators[i]) > 0;
  }
};

DistributedDataParallel::DistributedDataParallel(std::shared_ptr<nn::Module> module,
                                                 DistributedDataParallelOptions options)
    : module_(std::move(module)), options_(options) {
  KILN_CHECK(module_, "DistributedDataParallel: the module is null. Fix: pass the model to wrap.");
  group_ = options_.group ? options_.group : &default_group();
  KILN_CHECK(options_.bucket_cap_mb > 0 && options_.first_bucket_cap_mb > 0, "DistributedDataParallel: bucket caps "
             "must be positive, got bucket_cap_mb = ", options_.bucket_cap_mb, " and first_bucket_cap_mb = ",
             options_.first_bucket_cap_mb, ".");
  register_module("module", module_);
  nn::NamedTensors named = module_->named_parameters();
  for (const auto& [name, t] : named) {
    KILN_CHECK(t.device().is_cpu() || group_->backend() != "gloo", "DistributedDataParallel: parameter '", name,
               "' is on ", t.device().str(), " but the process group's backend is gloo, which moves CPU tensors. "
               "Fix: init({.backend = \"nccl\"}) for a model on the GPU, or keep the model on the CPU.");
    KILN_CHECK(t.device().is_cuda() || group_->backend() != "nccl", "DistributedDataParallel: parameter '", name,
               "' is on ", t.device().str(), " but the process group's backend is nccl, which moves CUDA tensors. "
               "Fix: model->to(kiln::cuda::device(kiln::distributed::local_rank())) before wrapping it, or use "
               "the gloo backend for a model on the CPU.");
  }
  int instance = ddp_instances++;
  if (group_->size() > 1) {
    check_same_parameters(*group_, named, instance);
    std::vector<Tensor> state;
    for (auto& [name, t] : named) state.push_back(t);
    for (auto& [name, t] : module_->named_buffers()) state.push_back(t);
    broadcast_coalesced(*group_, state, 0);
  }
  reducer_ = std::make_unique<Reducer>(*group_, named, options_);
  // Hooks on the wrapped module, so that calling it directly with any signature counts too.
  pre_hook_ = module_->register_forward_pre_hook([this](nn::Module& m, const std::vector<Tensor>&) {
    if (options_.broadcast_buffers && m.is_training() && group_->size() > 1) {
      std::vector<Tensor> buffers = m.buffers();
      if (!buffers.empty()) broadcast_coalesced(*group_, buffers, 0);
    }
  });
  post_hook_ = module_->register_forward_hook(
      [this](nn::Module&, const std::vector<Tensor>&, const std::vector<Tensor>& outputs) {
        if (options_.find_unused_parameters && is_grad_enabled() && reducer_->sync) reducer_->find_used(outputs);
      });
}

DistributedDataParallel::~DistributedDataParallel() {
  pre_hook_.remove();
  post_hook_.remove();
}

Tensor DistributedDataParallel::forward(const Tensor& input) { return (*module_)(input); }

DistributedDataParallel::NoSyncGuard::NoSyncGuard(DistributedDataParallel& ddp)
    : ddp_(ddp), previous_(ddp.reducer_->sync) {
  ddp_.reducer_->sync = false;
}

DistributedDataParallel::NoSyncGuard::~NoSyncGuard() { ddp_.reducer_->sync = previous_; }

std::vector<std::vector<std::string>> DistributedDataParallel::bucket_parameter_names() const {
  std::vector<std::vector<std::string>> out;
  for (const auto& b : reducer_->buckets) {
    out.emplace_back();
    for (size_t i : b.params) out.back().push_back(reducer_->names[i]);
  }
  return out;
}

BackwardTimeline DistributedDataParallel::last_timeline() const { return reducer_->last_timeline; }

}  // namespace kiln::distributed
