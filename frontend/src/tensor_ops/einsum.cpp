// einsum: an equation parsed into labels per operand, then reduced to the table's ops. Labels
// repeated within one operand take its diagonal; labels no later step needs are summed out as
// early as possible; the operands are contracted left to right, each pair as one batched
// matmul (batch labels, free labels of each side, contracted labels), so a compiled einsum is
// the GEMMs the compiler already tunes. The ellipsis broadcasts like NumPy's.
#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "kiln/tensor_ops/linalg.h"
#include "kiln/tensor_ops/rearrange.h"
#include "kiln/tensor_ops/reduction.h"

namespace kiln {

namespace {

// Labels are letters (0..51); the ellipsis's dims get labels from 52 up, aligned on the right.
using Labels = std::vector<int>;
constexpr int kEllipsisBase = 52;

struct Term {
  Labels labels;
  bool ellipsis = false;
  size_t ellipsis_at = 0;  // where the ellipsis sits among the letters
};

int letter_label(char c, std::string_view equation) {
  if (c >= 'a' && c <= 'z') return c - 'a';
  if (c >= 'A' && c <= 'Z') return 26 + (c - 'A');
  KILN_FAIL("[einsum] unexpected character '", std::string(1, c), "' in \"", std::string(equation),
            "\". Fix: use letters for subscripts, ',' between operands, '->' before the output and '...' for "
            "broadcast dims.");
}

char label_char(int label) {
  return label < 26 ? static_cast<char>('a' + label) : label < kEllipsisBase ? static_cast<char>('A' + label - 26) : '.';
}

Term parse_term(std::string_view text, std::string_view equation) {
  Term t;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '.') {
      KILN_CHECK(!t.ellipsis && text.substr(i, 3) == "...", "[einsum] expected at most one '...' per term in \"",
                 std::string(equation), "\".");
      t.ellipsis = true;
      t.ellipsis_at = t.labels.size();
      i += 2;
      continue;
    }
    t.labels.push_back(letter_label(text[i], equation));
  }
  return t;
}

// The term's labels with its ellipsis expanded to `dims` labels (the last `dims` of `width`).
Labels expand(const Term& t, int64_t dims, int64_t width) {
  Labels out(t.labels.begin(), t.labels.begin() + static_cast<std::ptrdiff_t>(t.ellipsis_at));
  for (int64_t k = width - dims; k < width; ++k) out.push_back(kEllipsisBase + static_cast<int>(k));
  out.insert(out.end(), t.labels.begin() + static_cast<std::ptrdiff_t>(t.ellipsis_at), t.labels.end());
  return out;
}

struct Operand {
  Tensor tensor;
  Labels labels;
};

// Takes the diagonal of every label repeated within the operand.
void take_diagonals(Operand& op, std::string_view equation) {
  for (bool repeated = true; repeated;) {
    repeated = false;
    for (size_t i = 0; i < op.labels.size() && !repeated; ++i) {
      for (size_t j = i + 1; j < op.labels.size() && !repeated; ++j) {
        if (op.labels[i] != op.labels[j]) continue;
        KILN_CHECK(op.tensor.size(static_cast<int64_t>(i)) == op.tensor.size(static_cast<int64_t>(j)),
                   "[einsum] subscript '", std::string(1, label_char(op.labels[i])), "' is repeated in one operand "
                   "of \"", std::string(equation), "\" over dims of sizes ", op.tensor.size(static_cast<int64_t>(i)),
                   " and ", op.tensor.size(static_cast<int64_t>(j)), ". Fix: a repeated subscript takes a diagonal, "
                   "which needs equal sizes.");
        op.tensor = diagonal(op.tensor, 0, static_cast<int64_t>(i), static_cast<int64_t>(j));
        const int label = op.labels[i];
        op.labels.erase(op.labels.begin() + static_cast<std::ptrdiff_t>(j));
        op.labels.erase(op.labels.begin() + static_cast<std::ptrdiff_t>(i));
        op.labels.push_back(label);  // diagonal() puts the diagonal last
        repeated = true;
      }
    }
  }
}

bool contains(const Labels& labels, int label) {
  return std::find(labels.begin(), labels.end(), label) != labels.end();
}

// Sums out the operand's labels that are not in `needed`.
void sum_unneeded(Operand& op, const Labels& needed) {
  Shape dims;
  Labels kept;
  for (size_t i = 0; i < op.labels.size(); ++i) {
    if (contains(needed, op.labels[i]))
      kept.push_back(op.labels[i]);
    else
      dims.push_back(static_cast<int64_t>(i));
  }
  if (dims.empty()) return;
  op.tensor = sum(op.tensor, dims);
  op.labels = kept;
}

// The operand's dims in `order` (labels), merged into groups of the given sizes.
Tensor arrange(const Operand& op, const std::vector<Labels>& groups, const std::map<int, int64_t>& size_of) {
  Shape perm, shape;
  for (const Labels& group : groups) {
    int64_t n = 1;
    for (int label : group) {
      perm.push_back(static_cast<int64_t>(std::find(op.labels.begin(), op.labels.end(), label) - op.labels.begin()));
      n *= size_of.at(label);
    }
    shape.push_back(n);
  }
  return op.tensor.permute(perm).reshape(shape);
}

// a and b contracted over their shared labels not in `keep`, as one batched matmul.
Operand contract(Operand a, Operand b, const Labels& keep, std::string_view equation) {
  sum_unneeded(a, [&] {
    Labels n = keep;
    n.insert(n.end(), b.labels.begin(), b.labels.end());
    return n;
  }());
  sum_unneeded(b, [&] {
    Labels n = keep;
    n.insert(n.end(), a.labels.begin(), a.labels.end());
    return n;
  }());
  Labels batch, contracted, free_a, free_b;
  std::map<int, int64_t> size_of;
  for (size_t i = 0; i < a.labels.size(); ++i) size_of[a.labels[i]] = a.tensor.size(static_cast<int64_t>(i));
  for (size_t i = 0; i < b.labels.size(); ++i) {
    const int label = b.labels[i];
    const int64_t n = b.tensor.size(static_cast<int64_t>(i));
    auto it = size_of.find(label);
    if (it == size_of.end()) {
      size_of[label] = n;
      free_b.push_back(label);
      continue;
    }
    // Size-1 dims broadcast (the ellipsis's, as NumPy's); other sizes must agree.
    KILN_CHECK(it->second == n || it->second == 1 || n == 1, "[einsum] subscript '", std::string(1, label_char(label)),
               "' has size ", it->second, " in one operand and ", n, " in another of \"", std::string(equation),
               "\". Fix: make the sizes equal (or 1, to broadcast).");
    it->second = std::max(it->second, n);
    (contains(keep, label) ? batch : contracted).push_back(label);
  }
  for (int label : a.labels)
    if (!contains(b.labels, label)) free_a.push_back(label);
  // Broadcast size-1 dims of shared labels to the common size.
  auto widen = [&](Operand& op) {
    Shape shape;
    for (int label : op.labels) shape.push_back(contains(free_a, label) || contains(free_b, label) ? -1 : size_of.at(label));
    Shape target(op.tensor.sizes());
    for (size_t i = 0; i < shape.size(); ++i)
      if (shape[i] >= 0) target[i] = shape[i];
    if (target != Shape(op.tensor.sizes())) op.tensor = op.tensor.expand(target);
  };
  widen(a);
  widen(b);
  const Tensor product = matmul(arrange(a, {batch, free_a, contracted}, size_of),
                                arrange(b, {batch, contracted, free_b}, size_of));
  Operand out;
  Shape shape;
  for (const Labels* group : {&batch, &free_a, &free_b})
    for (int label : *group) {
      out.labels.push_back(label);
      shape.push_back(size_of.at(label));
    }
  out.tensor = product.reshape(shape);
  return out;
}

}  // namespace

Tensor einsum(std::string_view equation, const std::vector<Tensor>& operands) {
  std::string eq;
  for (char c : equation)
    if (c != ' ') eq.push_back(c);
  const size_t arrow = eq.find("->");
  const std::string lhs = eq.substr(0, arrow);
  std::vector<Term> terms;
  for (size_t start = 0;;) {
    const size_t comma = lhs.find(',', start);
    terms.push_back(parse_term(std::string_view(lhs).substr(start, comma - start), equation));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  KILN_CHECK(terms.size() == operands.size(), "[einsum] \"", std::string(equation), "\" has ", terms.size(),
             " operand term(s) but ", operands.size(), " tensor(s) were given. Fix: one comma-separated term per "
             "tensor.");
  // How many dims each ellipsis covers, and the widest.
  int64_t width = 0;
  std::vector<int64_t> ellipsis_dims(terms.size(), 0);
  for (size_t i = 0; i < terms.size(); ++i) {
    KILN_CHECK(operands[i].defined(), "[einsum] operand ", i, " is undefined.");
    const int64_t letters = static_cast<int64_t>(terms[i].labels.size()), rank = operands[i].dim();
    KILN_CHECK(terms[i].ellipsis ? rank >= letters : rank == letters, "[einsum] term ", i, " of \"",
               std::string(equation), "\" has ", letters, " subscript(s)", terms[i].ellipsis ? " and '...'" : "",
               " but operand ", i, " is ", operands[i].type_str(), ". Fix: one subscript per dim",
               terms[i].ellipsis ? "" : " (or '...' for the rest)", ".");
    ellipsis_dims[i] = rank - letters;
    width = std::max(width, ellipsis_dims[i]);
  }
  std::vector<Operand> ops;
  std::map<int, int> uses;  // label -> how many operands name it
  for (size_t i = 0; i < terms.size(); ++i) {
    Operand op{operands[i], expand(terms[i], ellipsis_dims[i], width)};
    take_diagonals(op, equation);
    std::vector<int> seen;
    for (int label : op.labels)
      if (!contains(seen, label)) seen.push_back(label), ++uses[label];
    ops.push_back(std::move(op));
  }
  // The output's labels: given, or NumPy's implicit rule (ellipsis dims, then the letters
  // used once, in alphabetical order).
  Labels output;
  if (arrow != std::string::npos) {
    const Term out = parse_term(std::string_view(eq).substr(arrow + 2), equation);
    output = expand(out, out.ellipsis ? width : 0, width);
    for (size_t i = 0; i < output.size(); ++i) {
      KILN_CHECK(uses.count(output[i]), "[einsum] output subscript '", std::string(1, label_char(output[i])),
                 "' of \"", std::string(equation), "\" appears in no operand. Fix: name only subscripts of the "
                 "inputs.");
      KILN_CHECK(!contains(Labels(output.begin(), output.begin() + static_cast<std::ptrdiff_t>(i)), output[i]),
                 "[einsum] output subscript '", std::string(1, label_char(output[i])), "' is repeated in \"",
                 std::string(equation), "\".");
    }
  } else {
    for (int64_t k = 0; k < width; ++k) output.push_back(kEllipsisBase + static_cast<int>(k));
    for (const auto& [label, n] : uses)
      if (n == 1 && label < kEllipsisBase && !contains(output, label)) {
        int count = 0;  // letters repeated within one operand are summed (a trace) unless named
        for (const Term& t : terms) count += static_cast<int>(std::count(t.labels.begin(), t.labels.end(), label));
        if (count == 1) output.push_back(label);
      }
  }
  // Left to right: each contraction keeps what the output or a later operand needs.
  Operand result = ops[0];
  for (size_t i = 1; i < ops.size(); ++i) {
    Labels keep = output;
    for (size_t j = i + 1; j < ops.size(); ++j) keep.insert(keep.end(), ops[j].labels.begin(), ops[j].labels.end());
    result = contract(std::move(result), std::move(ops[i]), keep, equation);
  }
  sum_unneeded(result, output);
  // Output labels that only broadcast in (a size-1 ellipsis dim of every operand) are kept as is.
  Shape perm;
  for (int label : output)
    perm.push_back(static_cast<int64_t>(std::find(result.labels.begin(), result.labels.end(), label) - result.labels.begin()));
  return result.tensor.permute(perm);
}

}  // namespace kiln
