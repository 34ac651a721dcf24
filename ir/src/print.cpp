// The IR text form: a readable, line-oriented printout that parse.cpp reads back exactly.
//
//   graph FashionMLP {
//     assume s0 <= 512 slice @embed loc("model.cpp":9 "Net::forward")
//     input %0 "x": float32[s0, 784]
//     param %1 "fc1.weight": float32[784, 256]
//     const %2 "scale": float32[3] = [1, 2.5, 3]
//     %3: float32[s0, 256] = matmul(%0, %1) {} @fc1 loc("model.cpp":12 "Net::forward")
//     %4, %5: float32[s0, 256], bool[s0, 256] = dropout(%3) {p=0.5, seed=0, offset=0} @drop
//     %6: float32[2] = cond(%7, %4) {} {
//       region (%8: float32[2]) {
//         %9: float32[2] = relu(%8) {}
//         yield %9
//       }
//     }
//     return %4 "out", %5
//   }
//
// Grammar (tokens may be separated by any whitespace; `//` comments run to end of line):
//   graph   := 'graph' NAME '{' assume* (input | node)* 'return' outputs '}'
//   assume  := 'assume' SIZE '<=' INT NAME ('@' NAME)? ('loc' '(' STRING ':' INT STRING? ')')?
//              a symbolic size's bound (SizeBound) and the op that set it
//   input   := KIND '%'ID STRING? ':' type ('=' data)?     KIND: input | param | buffer | const
//   node    := (results ':' type (',' type)* '=')? OP '(' args ')' ATTRS
//              ('@' NAME)? ('loc' '(' STRING ':' INT STRING? ')')? ('{' region+ '}')?
//   results := '%'ID (',' '%'ID)*           every result's type is printed, in order
//   args    := (arg (',' arg)*)?            arg: '%'ID, or '_' for an absent optional input
//   ATTRS   := the op's attributes as Attrs::print writes them: '{' ... '}'
//   region  := 'region' '(' (KIND? '%'ID STRING? ':' type ('=' data)?)* ')' '{' node* 'yield'
//   outputs '}'
//              (KIND is omitted for plain inputs; entries are separated by ',')
//   outputs := ('%'ID STRING? (',' '%'ID STRING?)*)?
//   type    := DTYPE '[' (SIZE (',' SIZE)*)? ']' ('@' DEVICE)?   SIZE as format_size writes it
//   data    := '[' (ELEM (',' ELEM)*)? ']'  all elements, row-major; floats in shortest exact
//              form (nan, inf, -inf), integers, true/false
//   NAME    := [A-Za-z0-9_.]+ or STRING;    STRING: '"' ... '"' with \" \\ \n escapes
// Integer attributes print through SizeCodec (symbolic sizes read s0*784). A module path
// is printed only when not the root (""), a location only when set.
#include <charconv>
#include <cmath>
#include <sstream>
#include <unordered_map>

#include "text_form.h"

namespace kiln::ir {

std::string quote(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out + '"';
}

bool is_bare_word_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '.';
}

std::string bare_or_quoted(std::string_view s) {
  bool bare = !s.empty();
  for (char c : s) bare = bare && is_bare_word_char(c);
  return bare ? std::string(s) : quote(s);
}

namespace {

template <class T>
void write_float(std::ostream& os, T v) {
  if (std::isnan(v)) {
    os << "nan";
  } else if (std::isinf(v)) {
    os << (v < 0 ? "-inf" : "inf");
  } else {
    char buf[64];
    auto res = std::to_chars(buf, buf + sizeof buf, v);  // shortest form that reads back exactly
    os.write(buf, res.ptr - buf);
  }
}

// Every element of a constant. float16/bfloat16 print through float, which holds them
// exactly and reads back to the same bits.
void write_elements(std::ostream& os, const Tensor& t) {
  os << '[';
  auto sep = [&, first = true]() mutable {
    if (!first) os << ", ";
    first = false;
  };
  if (t.dtype() == DType::Float64) {
    for (double v : t.to_vector<double>()) sep(), write_float(os, v);
  } else if (is_floating(t.dtype())) {
    for (float v : t.to_vector<float>()) sep(), write_float(os, v);
  } else if (t.dtype() == DType::Bool) {
    for (bool v : t.to_vector<bool>()) sep(), os << (v ? "true" : "false");
  } else {
    for (int64_t v : t.to_vector<int64_t>()) sep(), os << v;
  }
  os << ']';
}

class Printer {
 public:
  explicit Printer(const PrintOptions& options) : canonical_(options.canonical) {}

  std::string print(const Graph& g) {
    os_ << "graph " << (canonical_ ? "_" : bare_or_quoted(g.name())) << " {\n";
    for (const SizeBound& b : g.size_bounds()) {
      os_ << "  assume " << format_size(b.size) << " <= " << b.max;
      if (!canonical_) {
        os_ << ' ' << bare_or_quoted(b.op);
        origin(b.module_path, b.loc);
      }
      os_ << '\n';
    }
    for (const GraphInput& in : g.inputs()) {
      os_ << "  " << input_kind_name(in.kind) << ' ';
      input(in);
      os_ << '\n';
    }
    body(g, 1, "return");
    os_ << "}\n";
    return os_.str();
  }

 private:
  // " @path loc("file":line "function")", each part only when set.
  void origin(const std::string& module_path, const Location& loc) {
    if (!module_path.empty()) os_ << " @" << bare_or_quoted(module_path);
    if (!(loc == Location{})) {
      os_ << " loc(" << quote(loc.file()) << ':' << loc.line();
      if (!loc.function().empty()) os_ << ' ' << quote(loc.function());
      os_ << ')';
    }
  }

  void indent(int depth) { os_ << std::string(static_cast<size_t>(2 * depth), ' '); }

  // A value where it is defined; canonical printing numbers values in this order.
  std::string define(const Value* v) {
    if (!v) return "%<null>";  // an invalid graph still prints, for its diagnostics
    if (!canonical_) return '%' + std::to_string(v->id);
    auto [it, inserted] = numbers_.emplace(v, static_cast<int>(numbers_.size()));
    return '%' + std::to_string(it->second);
  }
  std::string use(const Value* v) {
    if (!v) return "%<null>";
    if (!canonical_) return '%' + std::to_string(v->id);
    auto it = numbers_.find(v);
    return it != numbers_.end() ? '%' + std::to_string(it->second) : define(v);
  }

  static std::string type_of(const Value* v) { return v ? type_str(v->type) : "<null>"; }

  // `%0 "x": float32[2] = [1, 2]`, without the kind keyword.
  void input(const GraphInput& in) {
    os_ << define(in.value);
    if (!in.name.empty()) os_ << ' ' << quote(in.name);
    os_ << ": " << type_of(in.value);
    if (in.kind == InputKind::Constant && in.constant.defined()) {
      os_ << " = ";
      write_elements(os_, in.constant);
    }
  }

  void body(const Graph& g, int depth, const char* terminator) {
    for (const auto& n : g.nodes()) node(*n, depth);
    indent(depth);
    os_ << terminator;
    for (size_t i = 0; i < g.outputs().size(); ++i) {
      const GraphOutput& out = g.outputs()[i];
      os_ << (i == 0 ? " " : ", ") << use(out.value);
      if (!out.name.empty()) os_ << ' ' << quote(out.name);
    }
    os_ << '\n';
  }

  void node(const Node& n, int depth) {
    indent(depth);
    if (!n.outputs.empty()) {
      for (size_t i = 0; i < n.outputs.size(); ++i)
        os_ << (i == 0 ? "" : ", ") << define(n.outputs[i]);
      for (size_t i = 0; i < n.outputs.size(); ++i)
        os_ << (i == 0 ? ": " : ", ") << type_of(n.outputs[i]);
      os_ << " = ";
    }
    os_ << (n.op ? n.op->name : "<no op>") << '(';
    for (size_t i = 0; i < n.inputs.size(); ++i)
      os_ << (i == 0 ? "" : ", ") << (n.inputs[i] ? use(n.inputs[i]) : "_");
    os_ << ") ";
    if (n.attrs) {
      n.attrs->print(os_, &codec_);
    } else {
      os_ << "<no attrs>";
    }
    if (!canonical_) origin(n.module_path, n.loc);
    if (!n.regions.empty()) {
      os_ << " {\n";
      for (const auto& region : n.regions) {
        indent(depth + 1);
        os_ << "region (";
        for (size_t i = 0; i < region->inputs().size(); ++i) {
          const GraphInput& in = region->inputs()[i];
          os_ << (i == 0 ? "" : ", ");
          if (in.kind != InputKind::Input) os_ << input_kind_name(in.kind) << ' ';
          input(in);
        }
        os_ << ") {\n";
        body(*region, depth + 2, "yield");
        indent(depth + 1);
        os_ << "}\n";
      }
      indent(depth);
      os_ << '}';
    }
    os_ << '\n';
  }

  bool canonical_;
  std::ostringstream os_;
  SizeCodec codec_;
  std::unordered_map<const Value*, int> numbers_;
};

}  // namespace

std::string print_graph(const Graph& g, const PrintOptions& options) {
  return Printer(options).print(g);
}

std::string print_graph(const Graph& g) {
  return print_graph(g, PrintOptions{});
}

}  // namespace kiln::ir
