// The on-disk kernel cache: a miss writes an entry and a hit runs the same machine code
// without lowering or LLVM; keys follow the kernels, the target and the compiler; damaged,
// foreign and racing entries never reach the JIT; an unusable directory only costs the cache;
// default_cache_dir() follows the environment. Cold and warm compile times are printed.
// Every test uses its own temporary cache directory, never the user's.
#include "kiln/cpu/codegen/kernel_cache.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "codegen/five_op_kernel.h"
#include "kiln/cpu/codegen/kernels.h"
#include "kiln/error.h"
#include "kiln/ir/graph.h"
#include "kiln/ops/fused.h"
#include "test_util.h"

namespace kiln::cpu::codegen {
namespace {

namespace fs = std::filesystem;

// A fresh directory under the system's temporary directory, removed with its contents.
class TempDir {
 public:
  TempDir() {
    std::string pattern = (fs::temp_directory_path() / "kiln-cache-test.XXXXXX").string();
    EXPECT_NE(::mkdtemp(pattern.data()), nullptr);
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// ---- kernels ----

// Parsed graphs with one `fused` node each, and their specs (which point into the graphs).
struct Kernels {
  std::vector<std::shared_ptr<ir::Graph>> graphs;
  std::vector<exec::FusedKernelSpec> specs;

  void add(const std::string& text, const std::string& name) {
    graphs.push_back(ir::parse_graph(text));
    ir::verify(*graphs.back());
    for (const auto& node : graphs.back()->nodes())
      if (node->op == &ops::fused) specs.push_back(exec::fused_kernel_spec(*node, name));
  }
};

// relu(x * a + b) * c - d with scalar a, b, c, d: five ops.
Kernels five_op_kernel() {
  Kernels k;
  k.add(testing::kFiveOpKernel, "fused_0");
  return k;
}

// Ten different kernels of two inputs: op1(x, y), op2(that, x), then relu or tanh.
Kernels ten_kernels() {
  const char* binary[] = {"add", "sub", "mul", "maximum", "minimum"};
  Kernels k;
  for (int i = 0; i < 10; ++i) {
    std::string op1 = binary[i % 5], op2 = binary[(i + 1 + i / 5) % 5];
    std::string last = i % 2 ? "tanh" : "relu";
    k.add(R"(graph g {
  input %0 "x": float32[s0]
  input %1 "y": float32[s0]
  %2: float32[s0] = fused(%0, %1) {kind="elementwise"} {
    region (%3: float32[s0], %4: float32[s0]) {
      %5: float32[s0] = )" +
              op1 +
              R"((%3, %4) {}
      %6: float32[s0] = )" +
              op2 +
              R"((%5, %3) {}
      %7: float32[s0] = )" +
              last +
              R"((%6) {}
      yield %7
    }
  }
  return %2
})",
          "fused_" + std::to_string(i));
  }
  return k;
}

std::vector<float> inputs(size_t n, int salt) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i)
    v[i] =
        static_cast<float>(static_cast<int>((i * 7 + static_cast<size_t>(salt) * 13) % 23) - 11) *
        0.37f;
  return v;
}

std::vector<float> run_five(const KernelModule& m, const std::vector<float>& x) {
  float a = 1.5f, b = -0.25f, c = 2.0f, d = 0.75f;
  std::vector<float> out(x.size());
  void* buffers[] = {const_cast<float*>(x.data()), &a, &b, &c, &d, out.data()};
  int64_t dims[] = {static_cast<int64_t>(x.size())};
  m.lookup("fused_0")(buffers, dims, 0, dims[0]);
  return out;
}

// The outputs of every kernel of a ten_kernels() module, one after another.
std::vector<float> run_ten(const KernelModule& m, const std::vector<float>& x,
                           const std::vector<float>& y) {
  std::vector<float> all;
  for (int i = 0; i < 10; ++i) {
    std::vector<float> out(x.size());
    void* buffers[] = {const_cast<float*>(x.data()), const_cast<float*>(y.data()), out.data()};
    int64_t dims[] = {static_cast<int64_t>(x.size())};
    m.lookup("fused_" + std::to_string(i))(buffers, dims, 0, dims[0]);
    all.insert(all.end(), out.begin(), out.end());
  }
  return all;
}

// What relu(x*a+b)*c-d must give (no FMA contraction in the kernels or here, see
// -ffp-contract=off in tests/CMakeLists.txt).
std::vector<float> expected_five(const std::vector<float>& x) {
  std::vector<float> out;
  for (float v : x) {
    float r = v * 1.5f + -0.25f;
    out.push_back((r > 0 ? r : 0.0f) * 2.0f - 0.75f);
  }
  return out;
}

CodegenOptions cached_in(const TempDir& dir) {
  CodegenOptions options;
  options.cache_dir = dir.path();
  return options;
}

std::vector<std::string> files_in(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
  return names;
}

// The cache's entries (<key>.o) in `dir`; temporary files would show up as others.
std::vector<std::string> entries_in(const std::string& dir) {
  std::vector<std::string> paths;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().extension() == ".o") paths.push_back(e.path().string());
  return paths;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

bool starts_with(const std::string& s, const std::string& prefix) {
  return s.rfind(prefix, 0) == 0;
}

// ---- hits and misses ----

TEST(CodegenCache, MissThenHitRunsTheSameCode) {
  TempDir dir;
  Kernels k = five_op_kernel();
  CodegenOptions options = cached_in(dir);
  options.keep_ir = true;
  std::unique_ptr<KernelModule> miss = compile_kernels(k.specs, options);
  EXPECT_FALSE(miss->from_cache());
  ASSERT_EQ(entries_in(dir.path()).size(), 1u);
  std::string entry = entries_in(dir.path())[0];
  EXPECT_EQ(miss->cache_note(), "cache miss (written " + entry + ")");
  EXPECT_EQ(files_in(dir.path()).size(), 1u);  // no temporary left behind
  EXPECT_GT(miss->timings().llvm_ms, 0);

  std::unique_ptr<KernelModule> hit = compile_kernels(k.specs, options);
  EXPECT_TRUE(hit->from_cache());
  EXPECT_EQ(hit->cache_note(), "cache hit " + entry);
  EXPECT_EQ(hit->timings().lower_ms, 0);  // nothing lowered or compiled
  EXPECT_EQ(hit->timings().llvm_ms, 0);
  EXPECT_GT(hit->timings().load_ms, 0);
  EXPECT_EQ(hit->target(), miss->target());
  EXPECT_EQ(hit->mlir_text(), miss->mlir_text());
  EXPECT_FALSE(hit->mlir_text().empty());

  std::vector<float> x = inputs(1003, 1);  // not a multiple of the vector width
  EXPECT_EQ(run_five(*miss, x), expected_five(x));
  EXPECT_EQ(run_five(*hit, x), expected_five(x));
}

TEST(CodegenCache, ModuleOfTenKernelsHitsAsOne) {
  TempDir dir;
  Kernels k = ten_kernels();
  std::unique_ptr<KernelModule> miss = compile_kernels(k.specs, cached_in(dir));
  std::unique_ptr<KernelModule> hit = compile_kernels(k.specs, cached_in(dir));
  EXPECT_FALSE(miss->from_cache());
  EXPECT_TRUE(hit->from_cache());
  EXPECT_EQ(entries_in(dir.path()).size(), 1u);
  std::vector<float> x = inputs(517, 2), y = inputs(517, 3);
  std::vector<float> want = run_ten(*miss, x, y);
  EXPECT_EQ(run_ten(*hit, x, y), want);
  // The uncached compile gives the same numbers (the same pipeline without the cache).
  EXPECT_EQ(run_ten(*compile_kernels(k.specs), x, y), want);
  EXPECT_THROW(hit->lookup("fused_10"), Error);
}

TEST(CodegenCache, DisabledCacheWritesNothing) {
  Kernels k = five_op_kernel();
  for (const char* setting : {"", "off"}) {
    CodegenOptions options;
    options.cache_dir = setting;
    std::unique_ptr<KernelModule> m = compile_kernels(k.specs, options);
    EXPECT_FALSE(m->from_cache());
    EXPECT_EQ(m->cache_note(), "cache disabled");
    EXPECT_GT(m->timings().load_ms, 0);  // linking still counts
  }
  EXPECT_FALSE(fs::exists("off"));  // not taken for a relative directory
}

// ---- keys ----

TEST(CodegenCache, KeysFollowKernelsTargetAndCompiler) {
  KernelCacheKeyParts base{"module { func.func @fused_0() }", "x86_64 znver3 +avx2,+fma",
                           "kiln 0.1.0; LLVM 19.1.7"};
  std::string key = kernel_cache_key(base);
  EXPECT_EQ(key.size(), 32u);
  EXPECT_EQ(key.find_first_not_of("0123456789abcdef"), std::string::npos);
  EXPECT_EQ(kernel_cache_key(base), key);

  KernelCacheKeyParts other_kernels = base, other_target = base, other_version = base;
  other_kernels.module_text = "module { func.func @fused_1() }";
  other_target.target = "x86_64 znver3 +avx2,+fma,+avx512f";
  other_version.compiler = "kiln 0.2.0; LLVM 19.1.7";
  EXPECT_NE(kernel_cache_key(other_kernels), key);
  EXPECT_NE(kernel_cache_key(other_target), key);
  EXPECT_NE(kernel_cache_key(other_version), key);
  // Text moved from one part to the next is another key.
  KernelCacheKeyParts moved{"module { func.func @fused_0() }x", "86_64 znver3 +avx2,+fma",
                            base.compiler};
  EXPECT_NE(kernel_cache_key(moved), key);
}

TEST(CodegenCache, OtherKernelsAndTargetsGetTheirOwnEntries) {
  TempDir dir;
  Kernels five = five_op_kernel(), ten = ten_kernels();
  compile_kernels(five.specs, cached_in(dir));
  compile_kernels(ten.specs, cached_in(dir));
  EXPECT_EQ(entries_in(dir.path()).size(), 2u);
  // The same kernel under another name is other machine code (another symbol).
  Kernels renamed = five_op_kernel();
  renamed.specs[0].name = "fused_7";
  EXPECT_FALSE(compile_kernels(renamed.specs, cached_in(dir))->from_cache());
  EXPECT_EQ(entries_in(dir.path()).size(), 3u);
  // The portable target (another CPU and features) does not reuse the host's code.
  CodegenOptions portable = cached_in(dir);
  portable.host_cpu_features = false;
  std::unique_ptr<KernelModule> p = compile_kernels(five.specs, portable);
  EXPECT_FALSE(p->from_cache());
  EXPECT_EQ(entries_in(dir.path()).size(), 4u);
  EXPECT_TRUE(compile_kernels(five.specs, portable)->from_cache());
  std::vector<float> x = inputs(100, 4);
  EXPECT_EQ(run_five(*p, x), expected_five(x));
}

// ---- damaged entries ----

TEST(CodegenCache, DamagedEntriesAreRecompiledAndRewritten) {
  struct Damage {
    const char* what;
    std::function<std::string(std::string)> apply;
    const char* note;  // part of the module's cache note
  };
  std::vector<Damage> damages = {
      {"truncated to half", [](std::string b) { return b.substr(0, b.size() / 2); },
       "truncated or not a kiln cache entry"},
      {"truncated to 10 bytes", [](std::string b) { return b.substr(0, 10); },
       "truncated (10 bytes, less than its trailer)"},
      {"empty", [](std::string) { return std::string(); }, "truncated (0 bytes"},
      {"one byte flipped in the code",
       [](std::string b) {
         b[b.size() / 3] = static_cast<char>(b[b.size() / 3] ^ 0x40);
         return b;
       },
       "checksum mismatch (damaged)"},
      {"bytes appended", [](std::string b) { return b + "garbage"; },
       "truncated or not a kiln cache entry"},
      {"another format version",
       [](std::string b) {
         b[b.size() - 24] = 99;  // the trailer's format field (after the 8-byte magic)
         return b;
       },
       "format version 99, expected 1"},
      {"sizes that do not add up",
       [](std::string b) {
         b[b.size() - 16] = static_cast<char>(b[b.size() - 16] + 1);  // object size
         return b;
       },
       "size mismatch"},
  };
  TempDir dir;
  Kernels k = five_op_kernel();
  compile_kernels(k.specs, cached_in(dir));
  std::string entry = entries_in(dir.path()).at(0);
  std::string good = read_file(entry);
  std::vector<float> x = inputs(300, 5);
  for (const Damage& d : damages) {
    SCOPED_TRACE(d.what);
    write_file(entry, d.apply(good));
    std::unique_ptr<KernelModule> m = compile_kernels(k.specs, cached_in(dir));
    EXPECT_FALSE(m->from_cache());
    EXPECT_TRUE(starts_with(m->cache_note(), "cache entry " + entry + " unusable ("))
        << m->cache_note();
    EXPECT_NE(m->cache_note().find(d.note), std::string::npos) << m->cache_note();
    EXPECT_NE(m->cache_note().find("recompiled and rewritten"), std::string::npos);
    EXPECT_EQ(run_five(*m, x), expected_five(x));
    EXPECT_EQ(read_file(entry), good);  // rewritten whole
    EXPECT_TRUE(compile_kernels(k.specs, cached_in(dir))->from_cache());
  }
}

TEST(CodegenCache, EntryOfAnotherKeyIsNotTrusted) {
  TempDir dir;
  Kernels five = five_op_kernel(), ten = ten_kernels();
  compile_kernels(five.specs, cached_in(dir));
  std::string five_entry = entries_in(dir.path()).at(0);
  compile_kernels(ten.specs, cached_in(dir));
  std::string ten_entry;
  for (const std::string& e : entries_in(dir.path()))
    if (e != five_entry) ten_entry = e;
  fs::copy_file(five_entry, ten_entry, fs::copy_options::overwrite_existing);
  std::unique_ptr<KernelModule> m = compile_kernels(ten.specs, cached_in(dir));
  EXPECT_FALSE(m->from_cache());
  EXPECT_EQ(m->cache_note(), "cache entry " + ten_entry +
                                 " unusable (written for another key): recompiled and "
                                 "rewritten");
  std::vector<float> x = inputs(64, 6), y = inputs(64, 7);
  EXPECT_EQ(run_ten(*m, x, y), run_ten(*compile_kernels(ten.specs), x, y));
}

TEST(CodegenCache, WholeEntriesTheJitCannotUseAreRecompiled) {
  TempDir dir;
  Kernels k = five_op_kernel();
  compile_kernels(k.specs, cached_in(dir));
  std::string entry = entries_in(dir.path()).at(0);
  std::string key = fs::path(entry).stem().string();
  KernelCache cache(dir.path());
  std::optional<KernelCacheEntry> good = [&] {
    std::string problem;
    return cache.load(key, problem);
  }();
  ASSERT_TRUE(good.has_value());
  struct Case {
    KernelCacheEntry entry;  // stored with a valid trailer under the module's key
    const char* note;
  };
  std::vector<Case> cases = {
      {{"this is not an object file", {"fused_0"}}, "(the JIT cannot link it: "},
      {{good->object, {"fused_9"}}, "(it defines other kernels)"},
  };
  std::vector<float> x = inputs(40, 11);
  for (const Case& c : cases) {
    SCOPED_TRACE(c.note);
    ASSERT_EQ(cache.store(key, c.entry), "");
    std::unique_ptr<KernelModule> m = compile_kernels(k.specs, cached_in(dir));
    EXPECT_FALSE(m->from_cache());
    EXPECT_NE(m->cache_note().find(c.note), std::string::npos) << m->cache_note();
    EXPECT_NE(m->cache_note().find("recompiled and rewritten"), std::string::npos);
    EXPECT_EQ(run_five(*m, x), expected_five(x));
    EXPECT_TRUE(compile_kernels(k.specs, cached_in(dir))->from_cache());
  }
}

TEST(CodegenCache, EntriesRoundTripThroughTheCache) {
  TempDir dir;
  KernelCache cache(dir.path() + "/nested/kiln");  // created with its parents
  ASSERT_TRUE(cache.enabled());
  EXPECT_EQ(cache.note(), "");
  std::string problem = "stale";
  EXPECT_FALSE(cache.load("0123", problem).has_value());  // no entry: a plain miss
  EXPECT_EQ(problem, "");
  KernelCacheEntry entry{std::string("\x7f"
                                     "ELF\0\1\2 not really an object",
                                     27),
                         {"a", "b_c"}};
  EXPECT_EQ(cache.store("0123", entry), "");
  std::optional<KernelCacheEntry> back = cache.load("0123", problem);
  ASSERT_TRUE(back.has_value()) << problem;
  EXPECT_EQ(back->object, entry.object);
  EXPECT_EQ(back->kernels, entry.kernels);
  EXPECT_EQ(cache.path("0123"), dir.path() + "/nested/kiln/0123.o");
  // The object comes first, so object-file tools read an entry as the object it holds.
  EXPECT_EQ(read_file(cache.path("0123")).substr(0, entry.object.size()), entry.object);
}

// ---- unusable directories ----

TEST(CodegenCache, UnwritableDirectoryCompilesWithoutCache) {
  TempDir dir;
  std::string file = dir.path() + "/a_file";
  write_file(file, "not a directory");
  Kernels k = five_op_kernel();
  std::vector<float> x = inputs(50, 8);
  for (const std::string& cache_dir : {file, file + "/kiln"}) {
    SCOPED_TRACE(cache_dir);
    CodegenOptions options;
    options.cache_dir = cache_dir;
    std::unique_ptr<KernelModule> m;
    ASSERT_NO_THROW(m = compile_kernels(k.specs, options));
    EXPECT_FALSE(m->from_cache());
    EXPECT_TRUE(starts_with(m->cache_note(),
                            "cache unwritable: cannot create directory " + cache_dir + ": "))
        << m->cache_note();
    EXPECT_NE(m->cache_note().find("compiling without a cache (set KILN_CACHE_DIR"),
              std::string::npos);
    EXPECT_EQ(run_five(*m, x), expected_five(x));
  }
  // Read-only directories (root may write anyway, so only checked for other users).
  if (::geteuid() != 0) {
    std::string readonly = dir.path() + "/readonly";
    fs::create_directory(readonly);
    ::chmod(readonly.c_str(), 0555);
    CodegenOptions options;
    options.cache_dir = readonly;
    std::unique_ptr<KernelModule> m = compile_kernels(k.specs, options);
    EXPECT_TRUE(starts_with(m->cache_note(), "cache unwritable: " + readonly + ": "))
        << m->cache_note();
    ::chmod(readonly.c_str(), 0755);
  }
}

TEST(CodegenCache, DirectoryLostAfterOpeningFailsOnlyTheWrite) {
  TempDir dir;
  std::string cache_dir = dir.path() + "/kiln";
  KernelCache cache(cache_dir);
  ASSERT_TRUE(cache.enabled());
  fs::remove(cache_dir);
  write_file(cache_dir, "now a file");
  std::string failed = cache.store("abcd", {"object", {"k"}});
  EXPECT_TRUE(starts_with(failed, "cannot create a file in " + cache_dir + ": ")) << failed;
}

// ---- concurrency ----

TEST(CodegenCache, ConcurrentWritersLeaveOneWholeEntry) {
  Kernels k = ten_kernels();
  std::vector<float> x = inputs(257, 9), y = inputs(257, 10);
  std::vector<float> want = run_ten(*compile_kernels(k.specs), x, y);
  for (int round = 0; round < 2; ++round) {
    TempDir dir;
    constexpr int kThreads = 4;
    std::vector<std::unique_ptr<KernelModule>> modules(kThreads);
    std::vector<std::string> errors(kThreads);
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t)
      threads.emplace_back([&, t] {
        try {
          modules[t] = compile_kernels(k.specs, cached_in(dir));
        } catch (const std::exception& e) {
          errors[t] = e.what();
        }
      });
    for (std::thread& t : threads) t.join();
    for (int t = 0; t < kThreads; ++t) {
      ASSERT_EQ(errors[t], "");
      EXPECT_EQ(run_ten(*modules[t], x, y), want);
    }
    EXPECT_EQ(files_in(dir.path()).size(), 1u);  // one entry, no temporaries
    std::unique_ptr<KernelModule> after = compile_kernels(k.specs, cached_in(dir));
    EXPECT_TRUE(after->from_cache()) << after->cache_note();
    EXPECT_EQ(run_ten(*after, x, y), want);
  }
}

// ---- the default directory ----

// ---- the size limit ----

// An entry of about `bytes` for `key`, last used `age` ago.
void store_aged(const KernelCache& cache, const std::string& key, size_t bytes,
                std::chrono::seconds age) {
  ASSERT_EQ(cache.store(key, {std::string(bytes, 'x'), {"k"}}), "");
  fs::last_write_time(cache.path(key), fs::file_time_type::clock::now() - age);
}

TEST(CodegenCache, EvictsTheLeastRecentlyUsedEntriesBeyondTheLimit) {
  TempDir dir;
  KernelCache cache(dir.path(), 3500);  // room for three entries of ~1 KiB
  using std::chrono::seconds;
  store_aged(cache, std::string(32, 'a'), 1000, seconds(500));
  store_aged(cache, std::string(32, 'b'), 1000, seconds(400));
  store_aged(cache, std::string(32, 'c'), 1000, seconds(300));
  store_aged(cache, std::string(32, 'd'), 1000, seconds(200));
  // A hit makes 'a' the most recently used.
  std::string problem;
  ASSERT_TRUE(cache.load(std::string(32, 'a'), problem).has_value()) << problem;
  store_aged(cache, std::string(32, 'e'), 1000, seconds(0));
  EXPECT_EQ(cache.evict(std::string(32, 'e')), 2);
  std::vector<std::string> left;
  for (const auto& f : fs::directory_iterator(dir.path()))
    left.push_back(f.path().filename().string().substr(0, 1));
  std::sort(left.begin(), left.end());
  EXPECT_EQ(left, (std::vector<std::string>{"a", "d", "e"})) << "b and c were used longest ago";
  EXPECT_EQ(cache.evict(std::string(32, 'e')), 0) << "within the limit now";
}

TEST(CodegenCache, EvictionNeverDeletesTheEntryJustWrittenAndSaysWhatItDid) {
  TempDir dir;
  {  // A limit smaller than one entry keeps the newest entry anyway.
    KernelCache tiny(dir.path(), 10);
    store_aged(tiny, std::string(32, 'a'), 1000, std::chrono::seconds(100));
    store_aged(tiny, std::string(32, 'b'), 1000, std::chrono::seconds(0));
    EXPECT_EQ(tiny.evict(std::string(32, 'b')), 1);
    EXPECT_TRUE(fs::exists(tiny.path(std::string(32, 'b'))));
  }
  // Through compile_kernels: the note says how many entries went, and the limit comes from
  // KILN_CACHE_MAX_MB (0: keep only the newest).
  EnvVar limit("KILN_CACHE_MAX_MB", "0");
  EXPECT_EQ(default_cache_max_bytes(), 0u);
  Kernels k = five_op_kernel();
  std::unique_ptr<KernelModule> module = compile_kernels(k.specs, cached_in(dir));
  EXPECT_NE(module->cache_note().find("; evicted 1 least recently used entries"), std::string::npos)
      << module->cache_note();
  EXPECT_EQ(entries_in(dir.path()).size(), 1u);
  EnvVar unset("KILN_CACHE_MAX_MB", nullptr);
  EXPECT_EQ(default_cache_max_bytes(), size_t{256} << 20);
  EnvVar junk("KILN_CACHE_MAX_MB", "lots");
  EXPECT_EQ(default_cache_max_bytes(), size_t{256} << 20) << "an unreadable limit: the default";
}

TEST(CodegenCache, DefaultDirectoryFollowsTheEnvironment) {
  EnvVar kiln("KILN_CACHE_DIR", "/tmp/kiln-explicit");
  EnvVar xdg("XDG_CACHE_HOME", "/tmp/xdg");
  EnvVar home("HOME", "/tmp/home");
  EXPECT_EQ(default_cache_dir(), "/tmp/kiln-explicit");
  {
    EnvVar off("KILN_CACHE_DIR", "off");
    EXPECT_EQ(default_cache_dir(), "");
  }
  {
    EnvVar unset("KILN_CACHE_DIR", nullptr);
    EXPECT_EQ(default_cache_dir(), "/tmp/xdg/kiln");
    EnvVar relative_xdg("XDG_CACHE_HOME", "relative");  // ignored, as XDG says
    EXPECT_EQ(default_cache_dir(), "/tmp/home/.cache/kiln");
    EnvVar no_xdg("XDG_CACHE_HOME", nullptr);
    EXPECT_EQ(default_cache_dir(), "/tmp/home/.cache/kiln");
    EnvVar no_home("HOME", nullptr);
    EXPECT_EQ(default_cache_dir(), "");
  }
}

// ---- timing (printed, not asserted) ----

TEST(CodegenCache, ColdAndWarmCompileTimeReport) {
  compile_kernels(five_op_kernel().specs);  // LLVM's one-time set-up is not counted below
  using Clock = std::chrono::steady_clock;
  auto report = [](const char* what, const Kernels& k) {
    TempDir dir;
    double ms[3];
    std::unique_ptr<KernelModule> m[3];
    for (int i = 0; i < 3; ++i) {  // uncached, cold (miss + write), warm (hit)
      CodegenOptions options = i == 0 ? CodegenOptions{} : cached_in(dir);
      Clock::time_point start = Clock::now();
      m[i] = compile_kernels(k.specs, options);
      ms[i] = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
    }
    const CodegenTimings& cold = m[1]->timings();
    const CodegenTimings& warm = m[2]->timings();
    std::printf(
        "[codegen cache] %s: uncached %.1f ms; cold %.1f ms (build %.1f, lower %.1f, llvm %.1f, "
        "load %.1f); warm hit %.1f ms (build %.1f, load %.1f); entry %zu bytes\n",
        what, ms[0], ms[1], cold.build_ms, cold.lower_ms, cold.llvm_ms, cold.load_ms, ms[2],
        warm.build_ms, warm.load_ms,
        static_cast<size_t>(fs::file_size(entries_in(dir.path()).at(0))));
    EXPECT_TRUE(m[2]->from_cache());
  };
  report("5-op kernel", five_op_kernel());
  report("10 kernels", ten_kernels());
}

}  // namespace
}  // namespace kiln::cpu::codegen
