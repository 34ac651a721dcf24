// manifest.json <-> artifact::Manifest, with the strict checks a loader needs before it
// trusts any field.
#include "kiln/artifact/manifest.h"

#include <fstream>
#include <sstream>

#include "kiln/error.h"
#include "kiln/sha256.h"

namespace kiln::artifact {

std::string spec_str(const TensorSpec& spec) {
  std::string out = std::string(dtype_name(spec.dtype)) + "[";
  for (size_t d = 0; d < spec.shape.size(); ++d) {
    if (d) out += ", ";
    out += spec.shape[d].is_static() ? std::to_string(spec.shape[d].size) : spec.shape[d].symbol;
  }
  return out + "]";
}

namespace {

json::Value dims_json(const std::vector<DimSpec>& shape) {
  json::Array dims;
  for (const DimSpec& d : shape)
    dims.push_back(d.is_static() ? json::Value(d.size) : json::Value(d.symbol));
  return dims;
}

json::Value tensors_json(const std::vector<TensorSpec>& specs) {
  json::Array out;
  for (const TensorSpec& s : specs) {
    json::Value v;
    v["name"] = s.name;
    v["dtype"] = std::string(dtype_name(s.dtype));
    v["shape"] = dims_json(s.shape);
    out.push_back(std::move(v));
  }
  return out;
}

// Reads fields of one JSON object; every error names the manifest and the field's path.
class Reader {
 public:
  Reader(const json::Value& v, std::string origin, std::string path)
      : v_(v), origin_(std::move(origin)), path_(std::move(path)) {
    KILN_CHECK(v.is_object(), where(), "expected an object, found a ", json::kind_name(v.kind()),
               ". ", fix());
  }

  const json::Value& field(const char* key) const {
    const json::Value* f = v_.find(key);
    KILN_CHECK(f != nullptr, where(), "expected the field \"", key, "\", found none. ", fix());
    return *f;
  }
  const json::Value* optional(const char* key) const { return v_.find(key); }
  std::string string(const char* key) const {
    const json::Value& f = field(key);
    KILN_CHECK(f.is_string(), where(key), "expected a string, found a ", json::kind_name(f.kind()),
               ". ", fix());
    return f.as_string();
  }
  int64_t integer(const char* key) const {
    const json::Value& f = field(key);
    KILN_CHECK(f.is_int(), where(key), "expected an integer, found a ", json::kind_name(f.kind()),
               ". ", fix());
    return f.as_int();
  }
  const json::Array& array(const char* key) const {
    const json::Value& f = field(key);
    KILN_CHECK(f.is_array(), where(key), "expected an array, found a ", json::kind_name(f.kind()),
               ". ", fix());
    return f.as_array();
  }
  const json::Object& object(const char* key) const {
    const json::Value& f = field(key);
    KILN_CHECK(f.is_object(), where(key), "expected an object, found a ", json::kind_name(f.kind()),
               ". ", fix());
    return f.as_object();
  }
  // A file name inside the artifact directory (no directories, nothing hidden).
  std::string file_name(const char* key) const {
    std::string name = string(key);
    KILN_CHECK(name.find('/') == std::string::npos && name != "." && name != ".." &&
                   name.find('\0') == std::string::npos,
               where(key), "expected a file name inside the artifact directory, found \"", name,
               "\". ", fix());
    return name;
  }
  Reader child(const json::Value& v, const std::string& name) const {
    return Reader(v, origin_, path_.empty() ? name : path_ + "." + name);
  }
  std::string where(const char* key = nullptr) const {
    std::string p = path_;
    if (key) p += (p.empty() ? "" : ".") + std::string(key);
    return "[kiln_rt] " + origin_ + (p.empty() ? "" : ": field " + p) + ": ";
  }
  static const char* fix() {
    return "Fix: the manifest is damaged or was edited; export the model again "
           "(kiln::export_model or `kiln export`).";
  }

 private:
  const json::Value& v_;
  std::string origin_, path_;
};

DType read_dtype(const Reader& r) {
  std::string name = r.string("dtype");
  std::optional<DType> t = dtype_from_name(name);
  KILN_CHECK(t.has_value(), r.where("dtype"), "expected a dtype such as \"float32\", found \"",
             name, "\". ", Reader::fix());
  return *t;
}

std::vector<TensorSpec> read_tensors(const Reader& r, const char* key, bool plain_symbols) {
  std::vector<TensorSpec> out;
  const json::Array& items = r.array(key);
  for (size_t i = 0; i < items.size(); ++i) {
    Reader t = r.child(items[i], std::string(key) + "[" + std::to_string(i) + "]");
    TensorSpec spec;
    spec.name = t.string("name");
    spec.dtype = read_dtype(t);
    for (const json::Value& d : t.array("shape")) {
      if (d.is_int() && d.as_int() >= 0) {
        spec.shape.push_back({d.as_int(), ""});
        continue;
      }
      bool symbol = d.is_string() && !d.as_string().empty() &&
                    (!plain_symbols || d.as_string().find_first_of("*^") == std::string::npos);
      KILN_CHECK(symbol, t.where("shape"),
                 "expected sizes (integers >= 0) or symbols such as \"s0\", found ", json::dump(d),
                 ". ", Reader::fix());
      spec.shape.push_back({0, d.as_string()});
    }
    out.push_back(std::move(spec));
  }
  return out;
}

SymbolRange read_range(const Reader& r, const std::string& name, const json::Value& v) {
  bool ok = v.is_array() && v.as_array().size() == 2 && v.as_array()[0].is_int() &&
            v.as_array()[1].is_int() && v.as_array()[0].as_int() <= v.as_array()[1].as_int();
  KILN_CHECK(ok, r.where(), "expected the range of symbol ", name, " as [min, max], found ",
             json::dump(v), ". ", Reader::fix());
  return {name, v.as_array()[0].as_int(), v.as_array()[1].as_int()};
}

}  // namespace

json::Value Manifest::to_json() const {
  json::Value v;
  v["format"] = kFormatName;
  v["format_version"] = format_version;
  v["kiln_version"] = kiln_version;
  v["model"] = model;
  v["device"] = device;
  json::Value t;
  t["arch"] = target.arch;
  t["cpu"] = target.cpu;
  json::Array features(target.features.begin(), target.features.end());
  t["features"] = std::move(features);
  v["target"] = std::move(t);
  v["inputs"] = tensors_json(inputs);
  v["outputs"] = tensors_json(outputs);
  json::Array syms;
  for (const SymbolRange& s : symbols) {
    json::Value sv;
    sv["name"] = s.name;
    sv["min"] = s.min;
    sv["max"] = s.max;
    syms.push_back(std::move(sv));
  }
  v["symbols"] = std::move(syms);
  json::Array gs;
  for (const GraphEntry& g : graphs) {
    json::Value gv;
    gv["graph"] = g.graph;
    gv["kernels"] = g.kernels;
    gv["object"] = g.object;
    gv["kernel_count"] = g.kernel_count;
    json::Value ranges = json::Object{};
    for (const SymbolRange& s : g.symbols) ranges[s.name] = json::Array{s.min, s.max};
    gv["symbols"] = std::move(ranges);
    gs.push_back(std::move(gv));
  }
  v["graphs"] = std::move(gs);
  v["weights"] = weights;
  v["weights_embedded"] = weights_embedded;
  v["config"] = config;
  json::Value meta = json::Object{};
  for (const auto& [k, val] : metadata) meta[k] = val;
  v["metadata"] = std::move(meta);
  json::Value hashes = json::Object{};
  for (const auto& [k, val] : sha256) hashes[k] = val;
  v["sha256"] = std::move(hashes);
  v["artifact_sha256"] = artifact_sha256;
  return v;
}

Manifest Manifest::from_json(const json::Value& value, const std::string& origin) {
  Reader r(value, origin, "");
  std::string format = r.string("format");
  KILN_CHECK(format == kFormatName, r.where("format"), "expected \"", kFormatName, "\", found \"",
             format, "\". Fix: point kiln_rt at a directory written by kiln::export_model.");
  Manifest m;
  m.format_version = r.integer("format_version");
  m.kiln_version = r.string("kiln_version");
  KILN_CHECK(m.format_version != 1, r.where("format_version"), "format 1 (written by kiln ",
             m.kiln_version,
             ") is no longer read: its digest does not cover the manifest, so an edited "
             "signature could reach the kernels. Fix: export the model again with this kiln.");
  KILN_CHECK(m.format_version != 2, r.where("format_version"), "format 2 (written by kiln ",
             m.kiln_version,
             ") is no longer read: its kernel libraries do not record the CPU features they "
             "were compiled for, so an edited manifest could run them on a CPU without them. "
             "Fix: export the model again with this kiln.");
  KILN_CHECK(m.format_version >= 1 && m.format_version <= kFormatVersion, r.where("format_version"),
             "expected an artifact format this kiln_rt reads (1 to ", kFormatVersion, "), found ",
             m.format_version, " (written by kiln ", m.kiln_version,
             "). Fix: load it with a kiln_rt at least as new as the kiln that exported it, or "
             "export the model again with this kiln.");
  m.model = r.string("model");
  if (r.optional("device")) {  // format 4; earlier artifacts ran on the CPU
    m.device = r.string("device");
    KILN_CHECK(m.device == "cpu" || m.device == "cuda", r.where("device"),
               "expected \"cpu\" or \"cuda\", found \"", m.device, "\". ", Reader::fix());
  }
  Reader t = r.child(r.field("target"), "target");
  m.target.arch = t.string("arch");
  m.target.cpu = t.string("cpu");
  for (const json::Value& f : t.array("features")) {
    KILN_CHECK(f.is_string(), t.where("features"), "expected feature names, found ", json::dump(f),
               ". ", Reader::fix());
    m.target.features.push_back(f.as_string());
  }
  m.inputs = read_tensors(r, "inputs", true);
  m.outputs = read_tensors(r, "outputs", false);
  const json::Array& syms = r.array("symbols");
  for (size_t i = 0; i < syms.size(); ++i) {
    Reader s = r.child(syms[i], "symbols[" + std::to_string(i) + "]");
    SymbolRange range{s.string("name"), s.integer("min"), s.integer("max")};
    KILN_CHECK(range.min >= 0 && range.min <= range.max, s.where(),
               "expected 0 <= min <= max, found [", range.min, ", ", range.max, "]. ",
               Reader::fix());
    m.symbols.push_back(std::move(range));
  }
  for (const TensorSpec& spec : m.inputs)
    for (const DimSpec& d : spec.shape)
      KILN_CHECK(d.is_static() || m.find_symbol(d.symbol), r.where("inputs"), "input '", spec.name,
                 "' uses the symbol ", d.symbol, ", which \"symbols\" does not declare. ",
                 Reader::fix());
  const json::Array& graphs = r.array("graphs");
  KILN_CHECK(!graphs.empty(), r.where("graphs"), "expected at least one graph, found none. ",
             Reader::fix());
  for (size_t i = 0; i < graphs.size(); ++i) {
    Reader g = r.child(graphs[i], "graphs[" + std::to_string(i) + "]");
    GraphEntry e;
    e.graph = g.file_name("graph");
    e.kernel_count = g.integer("kernel_count");
    if (e.kernel_count > 0) {
      e.kernels = g.file_name("kernels");
      e.object = g.file_name("object");
    }
    for (const auto& [name, range] : g.object("symbols")) {
      KILN_CHECK(m.find_symbol(name), g.where("symbols"), "the symbol ", name,
                 " is not declared in \"symbols\". ", Reader::fix());
      e.symbols.push_back(read_range(g, name, range));
    }
    m.graphs.push_back(std::move(e));
  }
  m.weights = r.file_name("weights");
  if (const json::Value* embedded = r.optional("weights_embedded")) {
    KILN_CHECK(embedded->is_bool(), r.where("weights_embedded"), "expected true or false, found ",
               json::dump(*embedded), ". ", Reader::fix());
    m.weights_embedded = embedded->as_bool();
  }
  m.config = r.field("config");
  for (const auto& [k, v] : r.object("metadata")) {
    KILN_CHECK(v.is_string(), r.where("metadata"), "expected string values, found ", json::dump(v),
               " for \"", k, "\". ", Reader::fix());
    m.metadata[k] = v.as_string();
  }
  for (const auto& [k, v] : r.object("sha256")) {
    KILN_CHECK(v.is_string() && v.as_string().size() == 64, r.where("sha256"),
               "expected a 64-digit hex digest for \"", k, "\", found ", json::dump(v), ". ",
               Reader::fix());
    m.sha256[k] = v.as_string();
  }
  for (const std::string& file : m.files())
    KILN_CHECK(m.sha256.count(file), r.where("sha256"), "expected a digest of ", file,
               ", found none. ", Reader::fix());
  m.artifact_sha256 = r.string("artifact_sha256");
  // The document as read, not as this reader understood it: an unknown field is covered too.
  const std::string digest = artifact_digest(value);
  KILN_CHECK(m.artifact_sha256 == digest, r.where("artifact_sha256"),
             "expected the digest of the manifest's fields and the files' digests, ", digest,
             ", found ", m.artifact_sha256, ": manifest.json was changed after export. ",
             Reader::fix());
  return m;
}

std::vector<std::string> Manifest::files() const {
  std::vector<std::string> out;
  for (const GraphEntry& g : graphs) {
    out.push_back(g.graph);
    if (!g.kernels.empty()) out.push_back(g.kernels);
    if (!g.object.empty()) out.push_back(g.object);
  }
  out.push_back(weights);
  return out;
}

std::string artifact_digest(const json::Value& manifest) {
  // Everything the manifest says (the signature, the symbols' ranges, the CPU features, the
  // graphs) as compact JSON, then every file's digest by name: editing a field or a file
  // breaks it.
  json::Value described = manifest;
  std::erase_if(described.as_object(), [](const auto& field) {
    return field.first == "sha256" || field.first == "artifact_sha256";
  });
  std::string text = json::dump(described) + "\n";
  std::map<std::string, std::string> files;
  if (const json::Value* digests = manifest.find("sha256"); digests && digests->is_object())
    for (const auto& [name, digest] : digests->as_object())
      files[name] = digest.is_string() ? digest.as_string() : json::dump(digest);
  for (const auto& [name, digest] : files) text += name + " " + digest + "\n";
  return sha256_hex(text.data(), text.size());
}

std::string Manifest::combined_sha256() const {
  return artifact_digest(to_json());
}

const SymbolRange* Manifest::find_symbol(const std::string& name) const {
  for (const SymbolRange& s : symbols)
    if (s.name == name) return &s;
  return nullptr;
}

Manifest read_manifest(const std::string& dir) {
  std::string path = dir + "/" + kManifestFile;
  std::ifstream file(path, std::ios::binary);
  KILN_CHECK(file.good(), "[kiln_rt] expected an artifact directory holding ", kManifestFile,
             ", cannot open '", path,
             "'. Fix: pass the directory kiln::export_model (or `kiln export -o DIR`) wrote.");
  std::ostringstream text;
  text << file.rdbuf();
  json::Value v;
  try {
    v = json::parse(text.str(), {.max_depth = 16, .max_values = 1'000'000});
  } catch (const json::ParseError& e) {
    KILN_FAIL("[kiln_rt] ", path, ": expected a JSON manifest, found invalid JSON at byte ",
              e.offset, ": ", e.what(), " ", Reader::fix());
  }
  return Manifest::from_json(v, path);
}

}  // namespace kiln::artifact
