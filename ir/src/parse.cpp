// The IR text parser: recursive descent over the grammar documented in print.cpp. Errors
// name the line and column, what was expected and what was found.
#include <algorithm>
#include <charconv>
#include <cmath>
#include <unordered_map>

#include "kiln/closest_match.h"
#include "text_cursor.h"
#include "text_form.h"

namespace kiln::ir {

namespace {

std::string closest_op_hint(std::string_view name) {
  std::vector<std::string> names;
  for (const OpDef* op : all_ops()) names.push_back(op->name);
  std::string best = closest_match(name, names);
  if (!best.empty()) return "did you mean '" + best + "'?";
  return "use the name of an op in the op table (kiln::all_ops()).";
}

bool is_kind_word(std::string_view w, InputKind& kind) {
  for (InputKind k :
       {InputKind::Input, InputKind::Parameter, InputKind::Buffer, InputKind::Constant}) {
    if (w == input_kind_name(k)) {
      kind = k;
      return true;
    }
  }
  return false;
}

// Reads the grammar documented in print.cpp; TextCursor supplies the tokens.
class Parser : private TextCursor {
 public:
  explicit Parser(std::string_view text) : TextCursor(text) {}

  std::unique_ptr<Graph> parse() {
    if (!accept_word("graph")) fail_expected("'graph' at the start of the text");
    auto g = std::make_unique<Graph>(name("the graph's name"));
    expect('{', "after the graph's name");
    while (accept_word("assume")) size_bound(*g);
    body(*g, "return");
    expect('}', "to close the graph");
    if (!at_end()) fail_expected("the end of the text after the graph");
    return g;
  }

 private:
  // ---- values and scopes ----
  struct Definition {
    Value* value;
    const Graph* graph;
    size_t pos;
  };

  Value* define(Graph& g, int id, size_t pos, const Type& type) {
    auto it = defs_.find(id);
    if (it != defs_.end()) {
      fail_at(pos, "value %", id, " is defined twice (first at ", line_col(it->second.pos),
              "). Fix: give every value its own number.");
    }
    Value* v = g.make_value(type, id);
    defs_.emplace(id, Definition{v, &g, pos});
    return v;
  }

  Value* use(const Graph& g, int id, size_t pos) {
    auto it = defs_.find(id);
    if (it == defs_.end())
      fail_at(pos, "use of undefined value %", id,
              ". Fix: define it first (as an input or a node result, before its uses).");
    if (it->second.graph != &g)
      fail_at(pos, "value %", id,
              " is defined outside this region; a region may use only its own inputs and the "
              "values defined inside it. Fix: pass the value in as a region input.");
    return it->second.value;
  }

  // ---- grammar ----
  void body(Graph& g, std::string_view terminator) {
    for (;;) {
      if (peek() == '%') {
        node(g);
        continue;
      }
      std::string_view w = peek_word();
      InputKind kind;
      if (accept_word(terminator)) {
        outputs(g);
        return;
      }
      if (terminator == "return" && is_kind_word(w, kind)) {
        accept_word(w);
        input(g, kind);
      } else if (!w.empty()) {
        node(g);
      } else {
        fail_expected(terminator == "return" ? "an input, a node or 'return'"
                                             : "a node or 'yield'");
      }
    }
  }

  void size_bound(Graph& g) {
    SizeBound b;
    size_t size_pos = here();
    std::string_view size = token("*^-", "a symbolic size like s0");
    try {
      b.size = parse_size(size);
    } catch (const Error&) {
      fail_at(size_pos, "expected a symbolic size like s0 or s0*2, found '", size, "'.");
    }
    if (!is_symbolic_size(b.size))
      fail_at(size_pos, "an assume bounds a symbolic size, found the number ", size,
              ". Fix: write assume s0 <= 512.");
    expect('<', "after the bounded size");
    expect('=', "in '<='");
    size_t max_pos = here();
    std::string_view max = token("-", "the bound, a positive integer");
    auto res = std::from_chars(max.data(), max.data() + max.size(), b.max);
    if (res.ec != std::errc() || res.ptr != max.data() + max.size() || b.max < 1)
      fail_at(max_pos, "expected the bound, a positive integer, found '", max, "'.");
    b.op = name("the op that set the bound");
    origin(b.module_path, b.loc);
    g.add_size_bound(std::move(b));
  }

  // Optional `@path` and `loc("file":line "function")` after a node or a bound.
  void origin(std::string& module_path, Location& loc) {
    if (accept('@')) module_path = name("a module path");
    if (accept_word("loc")) {
      expect('(', "after 'loc'");
      std::string file = string_literal("a quoted file name");
      expect(':', "after the file name");
      const int line = static_cast<int>(integer("a line number"));
      std::string function = peek() == '"' ? string_literal("a quoted function name") : "";
      loc = Location(std::move(file), line, std::move(function));
      expect(')', "after the location");
    }
  }

  void input(Graph& g, InputKind kind) {
    auto [id, id_pos] = value_id();
    std::string label = peek() == '"' ? string_literal("the input's name") : "";
    expect(':', "after the input's name");
    Type type = parse_type();
    Tensor constant;
    size_t eq = here();
    if (accept('=')) {
      if (kind != InputKind::Constant)
        fail_at(eq, "only const inputs carry data, found '=' after an input of kind '",
                input_kind_name(kind), "'. Fix: declare it as const.");
      constant = data(type);
    }
    Value* v = define(g, id, id_pos, type);
    g.mutable_inputs().push_back({kind, std::move(label), v, std::move(constant)});
  }

  Type parse_type() {
    Type t;
    size_t start = here();
    std::string_view dtype = word("a type like float32[2, 3]");
    auto d = dtype_from_name(dtype);
    if (!d) fail_at(start, "expected a dtype (float32, int64, bool, ...), found '", dtype, "'.");
    t.dtype = *d;
    expect('[', "after the dtype");
    if (!accept(']')) {
      do {
        size_t size_pos = here();
        std::string_view s = token("*^-", "a size like 784 or s0");
        try {
          t.shape.push_back(parse_size(s));
        } catch (const Error&) {
          fail_at(size_pos, "expected a size like 784, s0, s0*784 or s0^2*3, found '", s, "'.");
        }
      } while (accept(','));
      expect(']', "after the dims");
    }
    if (accept('@')) {
      size_t device_pos = here();
      std::string_view s = token(":", "a device like cuda:0");
      try {
        t.device = Device(std::string(s));
      } catch (const Error&) {
        fail_at(device_pos, "expected a device like cpu or cuda:0, found '", s, "'.");
      }
    }
    return t;
  }

  Tensor data(const Type& type) {
    size_t start = here();
    for (int64_t d : type.shape)
      if (d < 0 || is_symbolic_size(d))
        fail_at(start, "a constant needs static dims, found the type ", type_str(type), ".");
    // The element count, checked before anything is allocated: it must fit int64, and each
    // element takes at least two characters ("1," or "1]") of the text that follows.
    int64_t n = 1;
    for (int64_t d : type.shape)
      if (__builtin_mul_overflow(n, d, &n))
        fail_at(start, "the constant's type ", type_str(type),
                " has more elements than a 64-bit size can count.");
    if (n > 0 && static_cast<uint64_t>(n) > remaining() / 2)
      fail_at(start, "the constant's type ", type_str(type), " needs ", n, " elements, but only ",
              remaining(), " characters of text follow.");
    Tensor t = Tensor::empty(type.shape, type.dtype);
    int64_t count = 0;
    expect('[', "before the constant's elements");
    if (!accept(']')) {
      do {
        size_t elem_pos = here();
        std::string_view e = token("+-", "an element");
        if (count == n)
          fail_at(elem_pos, "expected ", n, " elements for ", type_str(type), ", found more.");
        if (!store_element(t, count++, e))
          fail_at(elem_pos, "expected an element of dtype ", dtype_name(type.dtype), ", found '", e,
                  "'.");
      } while (accept(','));
      expect(']', "after the constant's elements");
    }
    if (count != n)
      fail_at(start, "expected ", n, " elements for ", type_str(type), ", found ", count, ".");
    return t;
  }

  // Writes element i of t from its text; false when the text is not a value of t's dtype.
  static bool store_element(Tensor& t, int64_t i, std::string_view e) {
    auto parse_number = [&](auto& v) {
      auto res = std::from_chars(e.data(), e.data() + e.size(), v);
      return res.ec == std::errc() && res.ptr == e.data() + e.size();
    };
    return visit_dtype(t.dtype(), [&](auto tag) {
      using T = decltype(tag);
      T* p = t.data_ptr<T>() + i;
      if constexpr (std::is_same_v<T, bool>) {
        if (e != "true" && e != "false") return false;
        *p = e == "true";
        return true;
      } else if constexpr (std::is_integral_v<T>) {
        return parse_number(*p);
      } else {
        using F = std::conditional_t<std::is_same_v<T, double>, double, float>;
        F v = 0;
        if (e == "nan")
          v = NAN;
        else if (e == "inf")
          v = INFINITY;
        else if (e == "-inf")
          v = -INFINITY;
        else if (!parse_number(v))
          return false;
        *p = T(v);
        return true;
      }
    });
  }

  void node(Graph& g) {
    std::vector<std::pair<int, size_t>> results;
    std::vector<Type> types;
    if (peek() == '%') {
      do {
        results.push_back(value_id());
      } while (accept(','));
      expect(':', "after the value list");
      size_t types_pos = here();
      do {
        types.push_back(parse_type());
      } while (accept(','));
      if (types.size() != results.size())
        fail_at(types_pos, "expected ", results.size(), " types for the ", results.size(),
                " values, found ", types.size(), ".");
      expect('=', "after the result types");
    }
    auto n = std::make_unique<Node>();
    size_t op_pos = here();
    std::string_view op_name = word("an op name");
    n->op = find_op(op_name);
    if (!n->op) fail_at(op_pos, "unknown op '", op_name, "'. Fix: ", closest_op_hint(op_name));
    expect('(', "after the op name");
    if (!accept(')')) {
      do {
        if (accept('_')) {
          n->inputs.push_back(nullptr);
        } else {
          auto [id, id_pos] = value_id();
          n->inputs.push_back(use(g, id, id_pos));
        }
      } while (accept(','));
      expect(')', "after the op's inputs");
    }
    n->attrs = attrs(*n->op, here());
    origin(n->module_path, n->loc);
    if (accept('{')) {
      do {
        region(g, *n);
      } while (peek_word() == "region");
      expect('}', "after the regions");
    }
    for (size_t i = 0; i < results.size(); ++i)
      n->outputs.push_back(define(g, results[i].first, results[i].second, types[i]));
    g.append_node(std::move(n));
  }

  // The op's attributes from their printed form (at `start`), read by the op's own type.
  std::unique_ptr<Attrs> attrs(const OpDef& op, size_t start) {
    std::string_view text = braced("the op's attributes in braces ({} for none)");
    std::unique_ptr<Attrs> a = op.attrs_prototype->clone();
    try {
      a->parse(text, &codec_);
    } catch (const Error& e) {
      fail_at(start, "bad attributes for '", op.name, "': ", e.what());
    }
    return a;
  }

  void region(Graph& g, Node& n) {
    if (!accept_word("region")) fail_expected("'region'");
    Graph* r = g.add_region(&n);
    expect('(', "after 'region'");
    if (!accept(')')) {
      do {
        InputKind kind = InputKind::Input;
        if (is_kind_word(peek_word(), kind)) accept_word(peek_word());
        input(*r, kind);
      } while (accept(','));
      expect(')', "after the region's inputs");
    }
    expect('{', "before the region's body");
    body(*r, "yield");
    expect('}', "to close the region");
  }

  void outputs(Graph& g) {
    if (peek() != '%') return;
    do {
      auto [id, id_pos] = value_id();
      Value* v = use(g, id, id_pos);
      g.add_output(v, peek() == '"' ? string_literal("an output name") : "");
    } while (accept(','));
  }

  std::unordered_map<int, Definition> defs_;
  SizeCodec codec_;
};

}  // namespace

std::unique_ptr<Graph> parse_graph(std::string_view text) {
  return Parser(text).parse();
}

}  // namespace kiln::ir
