// Loading an artifact (checks first, then files) and running it (guards, graph choice, a
// graph runner).
#include "loaded_model.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <mutex>
#include <sstream>
#include <string_view>

#include "artifact_checks.h"
#include "gpu_artifact.h"
#include "kiln/cpu/exec/graph_runner.h"
#include "kiln/cpu/exec/kernel_library.h"
#include "kiln/cpu/kernels/register.h"
#include "kiln/cpu_features.h"
#include "kiln/cuda/exec/graph_runner.h"
#include "kiln/cuda/stream.h"
#include "kiln/dispatch.h"
#include "kiln/error.h"
#include "kiln/ir/graph.h"
#include "kiln/ops/to_device.h"
#include "kiln/ops/view.h"
#include "kiln/serialize/safetensors.h"
#include "kiln/sha256.h"

namespace kiln::rt {

namespace {

// The architecture this kiln_rt was built for, named as LLVM's target triple names it.
#if defined(__x86_64__)
constexpr const char* kHostArch = "x86_64";
#elif defined(__aarch64__)
constexpr const char* kHostArch = "aarch64";
#else
constexpr const char* kHostArch = "unknown";
#endif

// "[1, inf)" for an unbounded range, "[2, 64]" otherwise.
std::string range_str(const artifact::SymbolRange& r) {
  return "[" + std::to_string(r.min) + ", " +
         (r.max == std::numeric_limits<int64_t>::max() ? std::string("inf)")
                                                       : std::to_string(r.max) + "]");
}

const char* const kReexport =
    "Fix: export the model again (kiln::export_model or `kiln export`) and copy the whole "
    "directory.";

std::string read_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  KILN_CHECK(f.good(), "[kiln_rt] expected the artifact file '", path, "', cannot open it. ",
             kReexport);
  std::ostringstream bytes;
  bytes << f.rdbuf();
  KILN_CHECK(!f.bad(), "[kiln_rt] reading '", path, "' failed. ", kReexport);
  return bytes.str();
}

void check_digest(const artifact::Manifest& m, const std::string& dir, const std::string& file,
                  const std::string& actual) {
  const std::string& expected = m.sha256.at(file);
  KILN_CHECK(actual == expected, "[kiln_rt] ", dir, "/", file,
             " is not the file that was exported: its sha256 is ", actual, ", the manifest says ",
             expected, " (the file was modified, truncated or replaced). ", kReexport);
}

// `path` mapped copy-on-write: its pages are shared with the page cache (and with other
// processes that load the same artifact) until something writes to them, which nothing in
// an inference graph does.
std::shared_ptr<const void> map_file(const std::string& path, size_t& size) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  KILN_CHECK(fd >= 0, "[kiln_rt] expected the artifact file '", path,
             "', cannot open it: ", std::strerror(errno), ". ", kReexport);
  struct stat st {};
  void* p = MAP_FAILED;
  int err = 0;
  if (::fstat(fd, &st) != 0) {
    err = errno;
  } else if (st.st_size == 0) {
    ::close(fd);
    KILN_FAIL("[kiln_rt] expected the artifact file '", path, "' to hold data, found it empty. ",
              kReexport);
  } else {
    size = static_cast<size_t>(st.st_size);
    p = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
    err = errno;
  }
  ::close(fd);
  KILN_CHECK(p != MAP_FAILED, "[kiln_rt] expected to map '", path, "' (", st.st_size,
             " bytes), failed: ", std::strerror(err), ". ", kReexport);
  return std::shared_ptr<const void>(
      p, [size](const void* q) { ::munmap(const_cast<void*>(q), size); });
}

// KILN_RT_MAP_WEIGHTS=1: the graph reads the weights where they are mapped instead of from
// a copy. The mapping's pages are shared with the page cache and with every process that
// loads the artifact, and loading copies nothing; but they are 4 KiB pages, where the copy
// lives in kiln's allocator on 2 MiB pages, and a batch-1 call that streams its weights
// pays for the TLB misses (ResidualMLP: 15% slower, docs/aot.md).
bool map_weights() {
  const char* env = std::getenv("KILN_RT_MAP_WEIGHTS");
  return env && *env && std::string_view(env) != "0";
}

// The weights: a safetensors file mapped and hashed from the mapping that is parsed, or
// (embedded) the data of a shared library hashed before it is loaded; copied, or viewed in
// place under KILN_RT_MAP_WEIGHTS (the tensors then keep the mapping or library alive).
SafetensorsFile load_weights(const artifact::Manifest& m, const std::string& dir) {
  std::string path = dir + "/" + m.weights;
  const void* data = nullptr;
  uint64_t size = 0;
  std::shared_ptr<const void> owner;
  if (!m.weights_embedded) {
    size_t mapped = 0;
    owner = map_file(path, mapped);
    data = owner.get();
    size = mapped;
    check_digest(m, dir, m.weights, sha256_hex(data, size));
  } else {
    check_digest(m, dir, m.weights, sha256_file_hex(path));
    auto library = std::make_shared<cpu::exec::KernelLibrary>(path);
    data = library->data(artifact::kWeightsSymbol);
    size = *static_cast<const uint64_t*>(library->data(artifact::kWeightsSizeSymbol));
    owner = library;
  }
  return map_weights() ? view_safetensors_bytes(owner, data, size, path)
                       : load_safetensors_bytes(data, size, path);
}

Tensor on_device(const Tensor& t, Device device) {
  if (t.device() == device) return t;
  ops::ToDeviceAttrs to;
  to.device = device;
  return dispatch1(ops::to_device, std::span<const Tensor>(&t, 1), to);
}

}  // namespace

// One graph of the artifact, its kernels and the runner that runs it.
struct LoadedModel::Graph {
  std::shared_ptr<ir::Graph> graph;
  std::unique_ptr<cpu::exec::KernelLibrary> library;      // a CPU graph's kernels
  std::shared_ptr<cuda::FusedKernelModule> gpu_kernels;  // a GPU graph's
  std::unique_ptr<backends::Executable> runner;
  Device device = kCPU;

  std::vector<Tensor> run(const std::vector<Tensor>& inputs, bool keep_on_device) {
    // Every graph input: the call's tensors for the signature's inputs (copied to the GPU
    // for a GPU graph, unless they are there already), the weights for the rest.
    std::vector<Tensor> all;
    size_t next = 0;
    for (const ir::GraphInput& in : graph->inputs())
      all.push_back(in.kind == ir::InputKind::Input ? on_device(inputs.at(next++), device)
                                                    : in.constant);
    std::vector<Tensor> out = runner->run(all);
    if (device.is_cuda() && !keep_on_device) {  // the caller gets host tensors of its own
      for (Tensor& t : out) t = on_device(t, kCPU);
      return out;
    }
    // An output that is (a view of) an input or a weight is copied: the caller owns its
    // outputs, may keep them after freeing its inputs, and must not write into the weights.
    for (Tensor& t : out) {
      bool borrowed = false;
      for (const Tensor& in : all) borrowed = borrowed || (in.defined() && t.shares_storage(in));
      if (borrowed) t = dispatch1(ops::clone, std::span<const Tensor>(&t, 1));
    }
    return out;
  }
};

LoadedModel::LoadedModel(const std::string& dir) : dir_(dir) {
  static std::once_flag kernels_registered;
  std::call_once(kernels_registered, [] { cpu::kernels::register_kernels(); });

  manifest_ = artifact::read_manifest(dir);
  const artifact::Manifest& m = manifest_;
  manifest_text_ = json::dump(m.to_json());
  for (const auto& s : m.inputs) input_signatures_.push_back(artifact::spec_str(s));
  for (const auto& s : m.outputs) output_signatures_.push_back(artifact::spec_str(s));

  // The host first: nothing of the artifact's code is loaded on a CPU or GPU that cannot run
  // it.
  const Device device = m.device == "cuda" ? kCUDA : kCPU;
  device_ = device;
  bool has_code = false;
  for (const artifact::GraphEntry& g : m.graphs) has_code = has_code || g.kernel_count > 0;
  if (device.is_cuda()) {
    check_gpu(m, dir);
  } else if (has_code) {
    KILN_CHECK(m.target.arch == kHostArch, "[kiln_rt] ", dir, ": the kernels were compiled for ",
               m.target.arch, ", this machine is ", kHostArch,
               ". Fix: export the model on (or for) this architecture.");
    std::vector<std::string> missing = missing_cpu_features(m.target.features);
    if (!missing.empty()) {
      std::string list;
      for (const std::string& f : missing) list += (list.empty() ? "" : ", ") + f;
      KILN_FAIL("[kiln_rt] ", dir, ": the kernels were compiled for ", m.target.cpu,
                " and use CPU features this machine lacks: ", list,
                ". Fix: export with ExportOptions::portable (`kiln export --portable`), or on "
                "a machine like this one.");
    }
  }

  SafetensorsFile weights = load_weights(m, dir);

  std::vector<const ir::Graph*> parsed;
  for (const artifact::GraphEntry& entry : m.graphs) {
    auto g = std::make_unique<Graph>();
    g->device = device;
    std::string path = dir + "/" + entry.graph;
    std::string text = read_bytes(path);
    check_digest(m, dir, entry.graph, sha256_hex(text.data(), text.size()));
    try {
      g->graph = ir::parse_graph(text);
      ir::verify(*g->graph);
    } catch (const Error& e) {
      KILN_FAIL("[kiln_rt] ", path, ": expected a graph this kiln_rt can run, found: ", e.what(),
                " ", kReexport);
    }
    size_t user_inputs = 0;
    for (ir::GraphInput& in : g->graph->mutable_inputs()) {
      if (in.kind == ir::InputKind::Input) {
        const artifact::TensorSpec* spec =
            user_inputs < m.inputs.size() ? &m.inputs[user_inputs] : nullptr;
        KILN_CHECK(spec && spec->dtype == in.value->type.dtype &&
                       spec->shape.size() == in.value->type.shape.size(),
                   "[kiln_rt] ", path, ": input ", user_inputs, " of the graph is ",
                   ir::type_str(in.value->type),
                   ", which the manifest's signature does not "
                   "declare. ",
                   kReexport);
        ++user_inputs;
        continue;
      }
      const Tensor* data = weights.find(in.name);
      KILN_CHECK(data != nullptr, "[kiln_rt] ", path, ": expected the weight \"", in.name, "\" in ",
                 m.weights, ", found none. ", kReexport);
      // Weights are stored on the host; a GPU graph's are uploaded (but for host scalars).
      ir::Type stored = ir::Type::of(*data);
      if (device.is_cuda()) stored.device = in.value->type.device;
      KILN_CHECK(stored == in.value->type, "[kiln_rt] ", path, ": the weight \"", in.name,
                 "\" is ", data->type_str(), " in ", m.weights, ", the graph reads ",
                 ir::type_str(in.value->type), ". ", kReexport);
      in.constant = on_device(*data, in.value->type.device);
    }
    KILN_CHECK(user_inputs == m.inputs.size(), "[kiln_rt] ", path, ": the graph takes ",
               user_inputs, " inputs, the manifest's signature ", m.inputs.size(), ". ", kReexport);

    size_t fused = cpu::exec::fused_nodes(*g->graph).size();
    KILN_CHECK(static_cast<int64_t>(fused) == entry.kernel_count, "[kiln_rt] ", path,
               ": the graph has ", fused, " fusion groups, the manifest lists ", entry.kernel_count,
               " kernels. ", kReexport);
    if (device.is_cuda()) {
      if (fused > 0) {
        std::string ptx = read_bytes(dir + "/" + entry.kernels);
        check_digest(m, dir, entry.kernels, sha256_hex(ptx.data(), ptx.size()));
        std::string cubin = read_bytes(dir + "/" + entry.object);
        check_digest(m, dir, entry.object, sha256_hex(cubin.data(), cubin.size()));
        g->gpu_kernels = load_gpu_kernels(m, *g->graph, ptx, cubin, dir);
      }
      std::shared_ptr<cuda::FusedKernelModule> kernels = g->gpu_kernels;
      g->runner = std::make_unique<cuda::exec::GraphRunner>(
          g->graph, [kernels](const std::string& name, std::span<void* const> buffers,
                              std::span<const int64_t> dims) { kernels->launch(name, buffers, dims); });
      parsed.push_back(g->graph.get());
      graphs_.push_back(std::move(g));
      continue;
    }
    cpu::exec::GraphRunner::Kernels kernels;
    if (fused > 0) {
      std::string library = dir + "/" + entry.kernels;
      check_digest(m, dir, entry.kernels, sha256_file_hex(library));
      // The object file is not loaded, but it is part of what was exported (for static
      // linking): a damaged one is reported too.
      check_digest(m, dir, entry.object, sha256_file_hex(dir + "/" + entry.object));
      // The features the code was compiled for, from the library itself: a manifest whose
      // list was emptied (and re-hashed) must not get code onto a CPU it would kill.
      check_kernel_target(m, library, dir);
      g->library = std::make_unique<cpu::exec::KernelLibrary>(library);
      cpu::exec::KernelLibrary* lib = g->library.get();
      kernels = cpu::exec::bind_fused_kernels(
          *g->graph, [lib](const std::string& name) { return lib->lookup(name); });
    }
    // Building the runner is where a graph the executor cannot run fails.
    g->runner = std::make_unique<cpu::exec::GraphRunner>(g->graph, std::move(kernels));
    parsed.push_back(g->graph.get());
    graphs_.push_back(std::move(g));
  }
  // What callers are told the artifact takes and returns, held to what the graphs say.
  check_signature(m, parsed, weights.metadata, dir);
}

LoadedModel::~LoadedModel() = default;

size_t LoadedModel::choose_graph(
    const std::vector<std::pair<std::string, int64_t>>& symbols) const {
  for (size_t g = 0; g < manifest_.graphs.size(); ++g) {
    bool serves = true;
    for (const artifact::SymbolRange& r : manifest_.graphs[g].symbols)
      for (const auto& [name, value] : symbols)
        if (name == r.name && (value < r.min || value > r.max)) serves = false;
    if (serves) return g;
  }
  std::string values;
  for (const auto& [name, value] : symbols)
    values += (values.empty() ? "" : ", ") + name + "=" + std::to_string(value);
  KILN_FAIL("[kiln_rt] ", manifest_.model, ": no graph of the artifact serves ", values,
            " (each graph serves its own ranges, listed under \"graphs\" in manifest.json). "
            "Fix: call with sizes a graph serves, or export with an example of these sizes.");
}

std::vector<Tensor> LoadedModel::run(const std::vector<Tensor>& inputs) {
  return checked_run(inputs, kCPU, false);
}

std::vector<Tensor> LoadedModel::run_on_device(const std::vector<Tensor>& inputs, void* stream) {
  KILN_CHECK(device_.is_cuda(), "[kiln_rt] ", manifest_.model,
             " runs on the cpu: its inputs and outputs are host memory. Fix: call kiln_rt_run, "
             "or export the model with `kiln export --device cuda`.");
  cuda::StreamGuard on(cuda::Stream::wrap(stream, device_.index));
  return checked_run(inputs, device_, true);
}

std::vector<Tensor> LoadedModel::checked_run(const std::vector<Tensor>& inputs, Device where,
                                             bool keep_on_device) {
  const artifact::Manifest& m = manifest_;
  KILN_CHECK(
      inputs.size() == m.inputs.size(), "[kiln_rt] ", m.model, " expects ", m.inputs.size(),
      " inputs (",
      [&] {
        std::string s;
        for (size_t i = 0; i < m.inputs.size(); ++i)
          s += (i ? ", " : "") + m.inputs[i].name + ": " + input_signatures_[i];
        return s;
      }(),
      "), got ", inputs.size(), ".");
  std::vector<std::pair<std::string, int64_t>> symbols;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const artifact::TensorSpec& spec = m.inputs[i];
    const Tensor& x = inputs[i];
    // Messages are built only on failure: a call that passes its guards formats nothing.
    auto refuse = [&](const std::string& why, const std::string& fix) {
      KILN_FAIL("[kiln_rt] ", m.model, ": input '", spec.name, "' expects ", input_signatures_[i],
                ", got ", x.type_str(), ": ", why, ". Fix: ", fix, ".");
    };
    if (x.dtype() != spec.dtype)
      refuse(std::string("the dtype is ") + std::string(dtype_name(x.dtype())),
             std::string("pass ") + std::string(dtype_name(spec.dtype)) + " data");
    if (x.dim() != static_cast<int64_t>(spec.shape.size()))
      refuse("rank " + std::to_string(x.dim()) + " instead of " + std::to_string(spec.shape.size()),
             "reshape the input to the signature's dims");
    for (size_t d = 0; d < spec.shape.size(); ++d) {
      const artifact::DimSpec& dim = spec.shape[d];
      int64_t size = x.size(static_cast<int64_t>(d));
      if (dim.is_static()) {
        if (size != dim.size)
          refuse("dim " + std::to_string(d) + " is " + std::to_string(size) +
                     ", the artifact was " + "exported for " + std::to_string(dim.size) + " only",
                 // `kiln export` can make only the batch dim dynamic; other dims need the
                 // C++ export with mark_dynamic.
                 d == 0 ? "pass that size, or export with a dynamic batch (`kiln export` "
                          "without --batch, or kiln::mark_dynamic(x, 0) before "
                          "kiln::export_model)"
                        : "pass that size, or export from C++ with kiln::mark_dynamic(x, " +
                              std::to_string(d) +
                              ") before kiln::export_model (`kiln export` can make only the "
                              "batch dim dynamic)");
        continue;
      }
      const artifact::SymbolRange* range = m.find_symbol(dim.symbol);
      if (size < range->min || size > range->max)
        refuse("dim " + std::to_string(d) + " (" + dim.symbol + ") is " + std::to_string(size) +
                   ", outside the range " + range_str(*range) + " the artifact serves",
               "pass a size in that range");
      bool seen = false;
      for (const auto& [name, value] : symbols) {
        if (name != dim.symbol) continue;
        seen = true;
        if (value != size)
          refuse("dim " + std::to_string(d) + " (" + dim.symbol + ") is " + std::to_string(size) +
                     ", but an earlier dim with the same symbol is " + std::to_string(value),
                 "every dim named " + dim.symbol + " must have one size per call");
      }
      if (!seen) symbols.push_back({dim.symbol, size});
    }
    KILN_CHECK(x.device() == where && x.is_contiguous(), "[kiln_rt] input '", spec.name,
               "' must be a contiguous ", where, " tensor, got one on ", x.device(),
               ". Fix: pass dense row-major data in ",
               where.is_cpu() ? "host memory" : "the memory of " + where.str(), ".");
  }
  std::vector<Tensor> out = graphs_[choose_graph(symbols)]->run(inputs, keep_on_device);
  for (Tensor& t : out)
    if (!t.is_contiguous()) t = dispatch1(ops::clone, std::span<const Tensor>(&t, 1));
  return out;
}

}  // namespace kiln::rt
