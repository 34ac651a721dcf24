// The safetensors writer (atomic: temp file + fsync + rename) and the validating reader.
#include "kiln/serialize/safetensors.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <functional>
#include <limits>
#include <numeric>
#include <optional>

#include "kiln/device_interface.h"
#include "kiln/dispatch.h"
#include "kiln/ops/view.h"
#include "kiln/serialize/durable_files.h"
#include "kiln/serialize/json.h"

namespace kiln {

// Tensor bytes are copied to and from files verbatim; the format is little-endian.
static_assert(std::endian::native == std::endian::little,
              "kiln's safetensors code assumes a little-endian host");

namespace {

namespace fs = std::filesystem;

constexpr const char* kMetadataKey = "__metadata__";
constexpr const char* kDamagedFix =
    "Fix: the file is damaged or not a safetensors file; write it again (kiln::save or "
    "safetensors.torch.save_file).";

struct DTypeName {
  DType dtype;
  std::string_view name;
};
constexpr DTypeName kDTypeNames[] = {
    {DType::Bool, "BOOL"},   {DType::Int32, "I32"},     {DType::Int64, "I64"},
    {DType::Float16, "F16"}, {DType::BFloat16, "BF16"}, {DType::Float32, "F32"},
    {DType::Float64, "F64"},
};
// Valid safetensors dtypes that kiln has no type for: named as such in the error.
constexpr std::string_view kForeignDTypes[] = {"U8",      "I8",      "I16",     "U16",     "U32",
                                               "U64",     "F8_E4M3", "F8_E5M2", "F8_E8M0", "F4",
                                               "F6_E2M3", "F6_E3M2", "C64"};

// A header is objects of objects of arrays (depth 3). The value cap bounds the parsed
// tree's memory (~40 bytes a value, 40 MB at most) far below what a 100 MB header could
// otherwise cost, and still allows ~100k tensors (about 9 values each).
const json::ParseOptions kHeaderParseOptions{.max_depth = 8, .max_values = 1'000'000};

std::optional<DType> dtype_from_name(std::string_view name) {
  for (const auto& e : kDTypeNames)
    if (e.name == name) return e.dtype;
  return std::nullopt;
}

std::string errno_text() {
  return std::strerror(errno);
}

// "an object", "a string", ... for messages.
std::string a_kind(json::Value::Kind k) {
  std::string_view name = json::kind_name(k);
  if (k == json::Value::Kind::Null) return "null";
  bool vowel = name[0] == 'a' || name[0] == 'i' || name[0] == 'o';
  return detail::str_cat(vowel ? "an " : "a ", name);
}

// ---- writer ----

// What the writer needs per tensor: contiguous CPU data and its place in the buffer.
struct PreparedTensor {
  const std::string* name;
  Tensor data;  // contiguous, CPU
  uint64_t begin = 0, end = 0;
};

struct Prepared {
  std::string header;                   // JSON, space-padded to a multiple of 8
  std::vector<PreparedTensor> tensors;  // in the caller's order
  std::vector<size_t> layout;           // indices into tensors, in buffer order
};

Prepared prepare(const NamedTensors& tensors, const std::map<std::string, std::string>& metadata,
                 const char* op) {
  Prepared p;
  p.tensors.reserve(tensors.size());
  std::map<std::string_view, size_t> seen;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const auto& [name, t] = tensors[i];
    KILN_CHECK(name != kMetadataKey, "[", op, "] the tensor name \"", kMetadataKey,
               "\" is reserved for the metadata entry of the format. Fix: rename the tensor.");
    auto [it, inserted] = seen.emplace(name, i);
    KILN_CHECK(inserted, "[", op, "] expected unique tensor names, got \"", name,
               "\" twice (entries ", it->second, " and ", i,
               "). Fix: give every tensor its own name.");
    KILN_CHECK(json::is_valid_utf8(name), "[", op, "] tensor name at entry ", i,
               " is not valid UTF-8. Fix: use UTF-8 names.");
    KILN_CHECK(t.defined(), "[", op, "] tensor \"", name,
               "\" is undefined (a default-constructed Tensor). Fix: pass a tensor with data.");
    if (t.is_symbolic()) {
      // An uninitialized lazy parameter explains itself (and names the remedy).
      try {
        t.impl()->symbolic->check_data_read("saving", SourceLoc::current());
      } catch (const Error& e) {
        KILN_FAIL("[", op, "] tensor \"", name, "\": ", e.what());
      }
    }
    KILN_CHECK(!t.is_symbolic(), "[", op, "] tensor \"", name,
               "\" is symbolic (it stands for a value inside a trace) and has no data. Fix: "
               "save concrete tensors, outside kiln::compile tracing.");
    // A device tensor's elements come to the host first (the file holds cpu data). Then the op
    // table's clone, not Tensor::contiguous (a frontend method): the runtime reads and writes
    // these files without the frontend.
    const Tensor host = t.device().is_cpu() ? t : detail::copy_view_span(t, kCPU);
    Tensor data =
        host.is_contiguous() ? host : dispatch1(ops::clone, std::span<const Tensor>(&host, 1));
    p.tensors.push_back({&name, data});
  }
  for (const auto& [key, value] : metadata) {
    KILN_CHECK(json::is_valid_utf8(key) && json::is_valid_utf8(value), "[", op,
               "] metadata entries must be UTF-8 text; the entry \"", key,
               "\" is not. Fix: encode binary values (e.g. base64) before storing them.");
  }

  // Buffer order: decreasing element size, stable, so each tensor starts at a multiple of
  // its element size (the header is padded to 8 bytes).
  p.layout.resize(p.tensors.size());
  std::iota(p.layout.begin(), p.layout.end(), size_t{0});
  std::stable_sort(p.layout.begin(), p.layout.end(), [&](size_t a, size_t b) {
    return p.tensors[a].data.element_size() > p.tensors[b].data.element_size();
  });
  uint64_t offset = 0;
  for (size_t i : p.layout) {
    PreparedTensor& pt = p.tensors[i];
    pt.begin = offset;
    offset += pt.data.nbytes();
    pt.end = offset;
  }

  // The header, member order as serde_json writes it: metadata first, then tensors, each
  // with dtype, shape, data_offsets.
  std::string& h = p.header;
  h += '{';
  bool first = true;
  if (!metadata.empty()) {
    json::dump_string(kMetadataKey, h);
    h += ":{";
    bool first_meta = true;
    for (const auto& [key, value] : metadata) {
      if (!first_meta) h += ',';
      first_meta = false;
      json::dump_string(key, h);
      h += ':';
      json::dump_string(value, h);
    }
    h += '}';
    first = false;
  }
  for (const PreparedTensor& pt : p.tensors) {
    if (!first) h += ',';
    first = false;
    json::dump_string(*pt.name, h);
    h += ":{\"dtype\":";
    json::dump_string(safetensors_dtype_name(pt.data.dtype()), h);
    h += ",\"shape\":[";
    for (size_t d = 0; d < pt.data.sizes().size(); ++d) {
      if (d) h += ',';
      h += std::to_string(pt.data.sizes()[d]);
    }
    h += "],\"data_offsets\":[";
    h += std::to_string(pt.begin);
    h += ',';
    h += std::to_string(pt.end);
    h += "]}";
  }
  h += '}';
  h.append((8 - h.size() % 8) % 8, ' ');
  return p;
}

using Sink = std::function<void(const void*, size_t)>;

void emit(const Prepared& p, const Sink& sink) {
  uint8_t len[8];
  uint64_t n = p.header.size();
  for (int i = 0; i < 8; ++i) len[i] = static_cast<uint8_t>(n >> (8 * i));
  sink(len, 8);
  sink(p.header.data(), p.header.size());
  for (size_t i : p.layout) {
    const Tensor& t = p.tensors[i].data;
    if (t.nbytes() > 0) sink(t.raw_data(), t.nbytes());
  }
}

// Closes a file descriptor on scope exit unless released.
struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

// ---- reader ----

// Where the bytes come from: a file (pread) or memory.
class ByteSource {
 public:
  virtual ~ByteSource() = default;
  virtual uint64_t size() const = 0;
  // Reads exactly n bytes at `offset` (the caller has checked the range).
  virtual void read(uint64_t offset, size_t n, void* dst) const = 0;
  // A tensor viewing the bytes at `offset` in place, or an undefined tensor when this
  // source does not lend its bytes (they are then read into a new tensor).
  virtual Tensor view(uint64_t offset, const Shape& shape, DType dtype) const { return {}; }
};

class MemorySource : public ByteSource {
 public:
  // With an `owner`, tensors whose bytes are aligned to their element size view the memory
  // in place and keep the owner alive.
  MemorySource(const void* data, size_t size, std::shared_ptr<const void> owner = nullptr)
      : data_(static_cast<const uint8_t*>(data)), size_(size), owner_(std::move(owner)) {}
  uint64_t size() const override { return size_; }
  void read(uint64_t offset, size_t n, void* dst) const override {
    if (n) std::memcpy(dst, data_ + offset, n);
  }
  Tensor view(uint64_t offset, const Shape& shape, DType dtype) const override {
    const uint8_t* p = data_ + offset;
    if (!owner_ || reinterpret_cast<uintptr_t>(p) % itemsize(dtype) != 0) return {};
    std::shared_ptr<const void> owner = owner_;
    return Tensor::from_blob(const_cast<uint8_t*>(p), IntList(shape.data(), shape.size()), dtype,
                             {}, [owner](void*) {});
  }

 private:
  const uint8_t* data_;
  size_t size_;
  std::shared_ptr<const void> owner_;
};

class FileSource : public ByteSource {
 public:
  explicit FileSource(const std::string& path) : path_(path) {
    fd_.fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    KILN_CHECK(fd_.fd >= 0, "[load_safetensors] cannot open '", path, "': ", errno_text(),
               ". Fix: check the path and its permissions.");
    struct stat st;
    KILN_CHECK(::fstat(fd_.fd, &st) == 0, "[load_safetensors] cannot stat '", path,
               "': ", errno_text(), ".");
    KILN_CHECK(S_ISREG(st.st_mode), "[load_safetensors] '", path,
               "' is not a regular file. Fix: pass the path of a .safetensors file.");
    size_ = static_cast<uint64_t>(st.st_size);
  }
  uint64_t size() const override { return size_; }
  void read(uint64_t offset, size_t n, void* dst) const override {
    auto* out = static_cast<uint8_t*>(dst);
    while (n > 0) {
      size_t ask = std::min<size_t>(n, size_t{1} << 30);
      ssize_t got = ::pread(fd_.fd, out, ask, static_cast<off_t>(offset));
      if (got < 0 && errno == EINTR) continue;
      KILN_CHECK(got >= 0, "[load_safetensors] read error in '", path_, "' at byte ", offset, ": ",
                 errno_text(), ".");
      KILN_CHECK(got > 0, "[load_safetensors] '", path_,
                 "' became shorter while it was read "
                 "(ends before byte ",
                 offset,
                 "). Fix: do not modify a checkpoint while it "
                 "is being loaded.");
      out += got;
      offset += static_cast<uint64_t>(got);
      n -= static_cast<size_t>(got);
    }
  }

 private:
  std::string path_;
  Fd fd_;
  uint64_t size_ = 0;
};

struct Entry {
  std::string name;
  DType dtype;
  Shape shape;
  uint64_t begin, end;
};

// Validates the header and the buffer layout, then reads every tensor.
SafetensorsFile load_from(const ByteSource& src, const std::string& origin) {
  const std::string where = detail::str_cat("[load_safetensors] '", origin, "'");
  const uint64_t file_size = src.size();
  KILN_CHECK(file_size >= 8, where,
             " is too short to be a safetensors file: expected at least "
             "8 bytes (the header length), got ",
             file_size, ". ", kDamagedFix);
  uint8_t len_bytes[8];
  src.read(0, 8, len_bytes);
  uint64_t header_len = 0;
  for (int i = 0; i < 8; ++i) header_len |= static_cast<uint64_t>(len_bytes[i]) << (8 * i);
  KILN_CHECK(header_len <= kSafetensorsMaxHeaderBytes, where, ": header length ", header_len,
             " is larger than the limit of ", kSafetensorsMaxHeaderBytes, " bytes. ", kDamagedFix);
  KILN_CHECK(header_len <= file_size - 8, where, ": header length ", header_len,
             " runs past the end of the file (", file_size - 8,
             " bytes follow the length): the file is truncated. ", kDamagedFix);
  std::string header(static_cast<size_t>(header_len), '\0');
  src.read(8, header.size(), header.data());
  const uint64_t data_start = 8 + header_len;
  const uint64_t data_len = file_size - data_start;

  KILN_CHECK(!header.empty() && header[0] == '{', where,
             ": expected the header to start with '{' (a JSON object), got ",
             header.empty() ? std::string("an empty header")
                            : detail::str_cat(
                                  "byte ", static_cast<int>(static_cast<unsigned char>(header[0]))),
             ". ", kDamagedFix);
  json::Value doc;
  try {
    doc = json::parse(header, kHeaderParseOptions);
  } catch (const json::ParseError& e) {
    KILN_FAIL(where, ": the header is not valid JSON: ", e.what(), " ", kDamagedFix);
  }

  SafetensorsFile out;
  std::vector<Entry> entries;
  for (const auto& [name, value] : doc.as_object()) {
    if (name == kMetadataKey) {
      KILN_CHECK(value.is_object(), where, ": expected \"", kMetadataKey,
                 "\" to be an object of strings, got ", a_kind(value.kind()), ". ", kDamagedFix);
      for (const auto& [key, v] : value.as_object()) {
        KILN_CHECK(v.is_string(), where, ": expected metadata value \"", key,
                   "\" to be a string, got ", a_kind(v.kind()), ". ", kDamagedFix);
        out.metadata.emplace(key, v.as_string());
      }
      continue;
    }
    const std::string tw = detail::str_cat(where, ": tensor \"", name, "\"");
    KILN_CHECK(value.is_object(), tw,
               ": expected an object with dtype, shape and data_offsets, "
               "got ",
               a_kind(value.kind()), ". ", kDamagedFix);
    for (const auto& [field, v] : value.as_object()) {
      (void)v;
      KILN_CHECK(field == "dtype" || field == "shape" || field == "data_offsets", tw,
                 ": unknown field \"", field, "\" (expected dtype, shape, data_offsets). ",
                 kDamagedFix);
    }
    const json::Value* dtype_v = value.find("dtype");
    const json::Value* shape_v = value.find("shape");
    const json::Value* offsets_v = value.find("data_offsets");
    KILN_CHECK(dtype_v && shape_v && offsets_v, tw, ": missing field \"",
               !dtype_v   ? "dtype"
               : !shape_v ? "shape"
                          : "data_offsets",
               "\". ", kDamagedFix);

    KILN_CHECK(dtype_v->is_string(), tw, ": expected dtype to be a string, got ",
               a_kind(dtype_v->kind()), ". ", kDamagedFix);
    const std::string& dname = dtype_v->as_string();
    std::optional<DType> dtype = dtype_from_name(dname);
    if (!dtype) {
      bool foreign = std::find(std::begin(kForeignDTypes), std::end(kForeignDTypes), dname) !=
                     std::end(kForeignDTypes);
      KILN_FAIL(tw, ": ", foreign ? "safetensors dtype \"" : "unknown dtype \"", dname, "\"",
                foreign ? " has no kiln equivalent" : "",
                " (kiln reads BOOL, I32, I64, F16, BF16, F32, F64). Fix: ",
                foreign ? "convert the tensor to a supported dtype before saving it."
                        : "the file is damaged or written by an incompatible tool.");
    }

    KILN_CHECK(shape_v->is_array(), tw, ": expected shape to be an array, got ",
               a_kind(shape_v->kind()), ". ", kDamagedFix);
    Shape shape;
    // Both the element count and the product of the non-zero sizes (what contiguous
    // strides are made of) must fit int64, or a shape like [0, 2^40, 2^40] would overflow
    // the strides of an "empty" tensor.
    int64_t numel = 1, extent = 1;
    for (const json::Value& d : shape_v->as_array()) {
      KILN_CHECK(d.is_int() && d.as_int() >= 0, tw,
                 ": expected shape entries to be non-negative integers, got ",
                 d.is_number() ? json::dump(d) : std::string(json::kind_name(d.kind())), ". ",
                 kDamagedFix);
      int64_t size = d.as_int();
      KILN_CHECK(!__builtin_mul_overflow(extent, std::max<int64_t>(size, 1), &extent), tw,
                 ": shape ", json::dump(*shape_v),
                 " is too large: the product of its sizes overflows 64 bits. ", kDamagedFix);
      numel *= size;  // <= extent: cannot overflow
      shape.push_back(size);
    }
    uint64_t nbytes = 0;
    KILN_CHECK(!__builtin_mul_overflow(static_cast<uint64_t>(numel), itemsize(*dtype), &nbytes), tw,
               ": shape ", json::dump(*shape_v), " of ", dname,
               " has more bytes than fit in 64 bits. ", kDamagedFix);

    KILN_CHECK(offsets_v->is_array() && offsets_v->as_array().size() == 2, tw,
               ": expected data_offsets to be an array [begin, end], got ", json::dump(*offsets_v),
               ". ", kDamagedFix);
    const json::Value& b = offsets_v->as_array()[0];
    const json::Value& e = offsets_v->as_array()[1];
    KILN_CHECK(b.is_int() && e.is_int() && b.as_int() >= 0 && e.as_int() >= b.as_int(), tw,
               ": expected data_offsets [begin, end] with 0 <= begin <= end, got ",
               json::dump(*offsets_v), ". ", kDamagedFix);
    uint64_t begin = static_cast<uint64_t>(b.as_int()), end = static_cast<uint64_t>(e.as_int());
    KILN_CHECK(end - begin == nbytes, tw, ": data_offsets ", json::dump(*offsets_v), " span ",
               end - begin, " bytes but shape ", json::dump(*shape_v), " of ", dname, " needs ",
               nbytes, ". ", kDamagedFix);
    KILN_CHECK(end <= data_len, tw, ": data_offsets ", json::dump(*offsets_v),
               " are out of range: the data buffer has ", data_len,
               " bytes (the file is truncated or the offsets are wrong). ", kDamagedFix);
    entries.push_back({name, *dtype, std::move(shape), begin, end});
  }

  // The ranges must tile [0, data_len) exactly: every byte belongs to exactly one tensor.
  std::vector<size_t> order(entries.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return std::tie(entries[a].begin, entries[a].end) < std::tie(entries[b].begin, entries[b].end);
  });
  uint64_t covered = 0;
  const Entry* prev = nullptr;
  for (size_t i : order) {
    const Entry& e = entries[i];
    KILN_CHECK(e.begin >= covered, where, ": tensors \"", prev ? prev->name : "", "\" [",
               prev ? prev->begin : 0, ", ", covered, ") and \"", e.name, "\" [", e.begin, ", ",
               e.end, ") overlap in the data buffer. ", kDamagedFix);
    KILN_CHECK(e.begin == covered, where, ": gap in the data buffer: bytes [", covered, ", ",
               e.begin, ") belong to no tensor (before \"", e.name, "\"). ", kDamagedFix);
    covered = e.end;
    if (e.end > e.begin) prev = &e;
  }
  KILN_CHECK(covered == data_len, where, ": ", data_len - covered,
             " trailing bytes after the last tensor (the data buffer has ", data_len,
             " bytes, the tensors cover ", covered, "). ", kDamagedFix);

  out.tensors.reserve(entries.size());
  for (const Entry& e : entries) {
    size_t n = static_cast<size_t>(e.end - e.begin);
    Tensor t = n > 0 ? src.view(data_start + e.begin, e.shape, e.dtype) : Tensor();
    if (!t.defined()) {
      t = Tensor::empty(e.shape, e.dtype);
      if (n > 0) src.read(data_start + e.begin, n, t.raw_data());
    }
    if (n > 0) {
      if (e.dtype == DType::Bool) {
        // A C++ bool must hold 0 or 1; any other byte would be undefined behaviour later.
        const auto* bytes = static_cast<const uint8_t*>(t.raw_data());
        for (size_t k = 0; k < n; ++k)
          KILN_CHECK(bytes[k] <= 1, where, ": tensor \"", e.name, "\" (BOOL) holds byte ",
                     static_cast<int>(bytes[k]), " at element ", k, "; booleans must be 0 or 1. ",
                     kDamagedFix);
      }
    }
    out.tensors.emplace_back(e.name, std::move(t));
  }
  return out;
}

}  // namespace

const Tensor* SafetensorsFile::find(const std::string& name) const {
  for (const auto& [n, t] : tensors)
    if (n == name) return &t;
  return nullptr;
}

std::string_view safetensors_dtype_name(DType t) {
  for (const auto& e : kDTypeNames)
    if (e.dtype == t) return e.name;
  KILN_FAIL("[safetensors] dtype ", t, " has no safetensors name.");
}

std::vector<uint8_t> safetensors_bytes(const NamedTensors& tensors,
                                       const std::map<std::string, std::string>& metadata) {
  Prepared p = prepare(tensors, metadata, "safetensors_bytes");
  std::vector<uint8_t> out;
  emit(p, [&](const void* data, size_t n) {
    const auto* b = static_cast<const uint8_t*>(data);
    out.insert(out.end(), b, b + n);
  });
  return out;
}

void save_safetensors(const std::string& path, const NamedTensors& tensors,
                      const std::map<std::string, std::string>& metadata) {
  // Everything that can be checked is checked before the file system is touched.
  Prepared p = prepare(tensors, metadata, "save_safetensors");
  KILN_CHECK(!path.empty(), "[save_safetensors] expected a file path, got an empty string.");

  fs::path target(path);
  KILN_CHECK(target.has_filename(), "[save_safetensors] '", path,
             "' names a directory, not a file. Fix: add a file name (e.g. model.safetensors).");
  fs::path dir = target.parent_path();
  if (dir.empty()) dir = ".";
  // Temporary files of saves to this path that were killed before their rename.
  durable::remove_stale_scratch((dir / ("." + target.filename().string())).string(), ".tmp-");
  // A hidden name in the same directory, so the final rename stays on one file system.
  static std::atomic<uint64_t> counter{0};
  fs::path tmp;
  Fd fd;
  for (int attempt = 0; attempt < 100 && fd.fd < 0; ++attempt) {
    tmp =
        dir / detail::str_cat(".", target.filename().string(), ".tmp-", ::getpid(), "-", counter++);
    fd.fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd.fd < 0 && errno != EEXIST) break;
  }
  KILN_CHECK(fd.fd >= 0, "[save_safetensors] cannot create a temporary file in '", dir.string(),
             "' to write '", path, "': ", errno_text(),
             ". Fix: make sure the directory exists and is writable.");

  try {
    emit(p, [&](const void* data, size_t n) {
      const auto* b = static_cast<const uint8_t*>(data);
      while (n > 0) {
        ssize_t w = ::write(fd.fd, b, std::min<size_t>(n, size_t{1} << 30));
        if (w < 0 && errno == EINTR) continue;
        KILN_CHECK(w > 0, "[save_safetensors] writing '", path, "' failed: ", errno_text(),
                   ". Fix: check free disk space and file size limits; the previous file (if "
                   "any) is unchanged.");
        b += w;
        n -= static_cast<size_t>(w);
      }
    });
    KILN_CHECK(::fsync(fd.fd) == 0, "[save_safetensors] fsync of '", tmp.string(),
               "' failed: ", errno_text(), ". The previous file (if any) is unchanged.");
    int rc = ::close(fd.fd);
    fd.fd = -1;
    KILN_CHECK(rc == 0, "[save_safetensors] closing '", tmp.string(), "' failed: ", errno_text(),
               ". The previous file (if any) is unchanged.");
    KILN_CHECK(::rename(tmp.c_str(), path.c_str()) == 0, "[save_safetensors] cannot replace '",
               path, "': ", errno_text(),
               ". Fix: the target must be a writable file path, not a directory.");
  } catch (...) {
    if (fd.fd >= 0) {
      ::close(fd.fd);
      fd.fd = -1;
    }
    ::unlink(tmp.c_str());
    throw;
  }
  // Persist the rename itself; a failure here cannot be undone and the data is in place.
  Fd dfd;
  dfd.fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd.fd >= 0) ::fsync(dfd.fd);
}

SafetensorsFile load_safetensors(const std::string& path) {
  FileSource src(path);
  return load_from(src, path);
}

SafetensorsFile load_safetensors_bytes(const void* data, size_t size, const std::string& origin) {
  MemorySource src(data, size);
  return load_from(src, origin);
}

SafetensorsFile view_safetensors_bytes(std::shared_ptr<const void> owner, const void* data,
                                       size_t size, const std::string& origin) {
  MemorySource src(data, size, std::move(owner));
  return load_from(src, origin);
}

}  // namespace kiln
