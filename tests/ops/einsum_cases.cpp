// OpCases for einsum, filed under matmul (the op it lowers to): each equation against a naive
// reference that sums the product over every assignment of the subscripts, through the
// harness (dtypes, strided inputs, gradcheck, compiled == eager, the GPU against the CPU);
// and its errors.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "harness.h"
#include "test_util.h"

namespace kiln::testing {
namespace {

// sum over all subscript values of prod_k operand_k[its subscripts], for equations with
// explicit "->", letters only, and no broadcasting.
Ref ref_einsum(const std::string& equation, const std::vector<Ref>& operands) {
  const size_t arrow = equation.find("->");
  std::vector<std::string> terms;
  for (size_t start = 0;;) {
    const size_t comma = equation.find(',', start);
    terms.push_back(equation.substr(start, std::min(comma, arrow) - start));
    if (comma == std::string::npos || comma > arrow) break;
    start = comma + 1;
  }
  const std::string out = equation.substr(arrow + 2);
  std::map<char, int64_t> size;
  for (size_t k = 0; k < terms.size(); ++k)
    for (size_t d = 0; d < terms[k].size(); ++d) size[terms[k][d]] = operands[k].shape[d];
  std::vector<char> letters;
  for (const auto& [c, n] : size) letters.push_back(c);
  Shape out_shape;
  for (char c : out) out_shape.push_back(size[c]);
  Ref r{out_shape, std::vector<double>(static_cast<size_t>(numel(out_shape)), 0.0)};
  std::map<char, int64_t> at;
  for (char c : letters) at[c] = 0;
  for (;;) {
    double product = 1;
    for (size_t k = 0; k < terms.size(); ++k) {
      Shape index;
      for (char c : terms[k]) index.push_back(at[c]);
      product *= ref_at(operands[k], index);
    }
    int64_t flat = 0;
    for (char c : out) flat = flat * size[c] + at[c];
    r.v[static_cast<size_t>(flat)] += product;
    size_t i = letters.size();
    while (i-- > 0 && ++at[letters[i]] == size[letters[i]]) at[letters[i]] = 0;
    if (i == static_cast<size_t>(-1)) break;
  }
  return r;
}

OpCase einsum_case(const std::string& equation, std::vector<Shape> shapes, std::string label = "") {
  OpCase c;
  c.op = "matmul";
  c.label = "einsum_" + (label.empty() ? equation : label);
  for (char& ch : c.label)
    if (ch == ',' || ch == '-' || ch == '>' || ch == '.') ch = '_';
  std::vector<Input> run;
  for (Shape& s : shapes) run.push_back(Input{std::move(s)});
  c.runs = {run};
  c.fn = [equation](const std::vector<Tensor>& in) { return einsum(equation, in); };
  c.ref = [equation](const std::vector<Ref>& r) { return ref_einsum(equation, r); };
  return c;
}

Register einsum_cases({
    einsum_case("ij,jk->ik", {{3, 4}, {4, 5}}),
    einsum_case("bij,bjk->bik", {{2, 3, 4}, {2, 4, 2}}),
    einsum_case("bhqd,bhkd->bhqk", {{2, 2, 3, 4}, {2, 2, 5, 4}}),
    einsum_case("ij->ji", {{3, 4}}),
    einsum_case("ii->i", {{4, 4}}, "diagonal"),
    einsum_case("ii->", {{4, 4}}, "trace"),
    einsum_case("i,i->", {{5}, {5}}, "dot"),
    einsum_case("i,j->ij", {{3}, {4}}, "outer"),
    einsum_case("ij,ij->ij", {{3, 4}, {3, 4}}, "hadamard"),
    einsum_case("ijk->", {{2, 3, 4}}, "total"),
    einsum_case("ij,jk,kl->il", {{2, 3}, {3, 4}, {4, 2}}, "chain"),
    einsum_case("bn,anm,bm->ba", {{2, 3}, {4, 3, 5}, {2, 5}}, "bilinear"),
    einsum_case("iij->ji", {{3, 3, 2}}, "partial_diagonal"),
});

void expect_close(const Tensor& got, const Tensor& want) {
  ASSERT_EQ(Shape(got.sizes()), Shape(want.sizes()));
  const std::vector<double> g = got.to(kFloat64).contiguous().to_vector<double>();
  const std::vector<double> w = want.to(kFloat64).contiguous().to_vector<double>();
  for (size_t i = 0; i < g.size(); ++i) EXPECT_NEAR(g[i], w[i], 1e-5) << "element " << i;
}

TEST(Einsum, ImplicitOutputAndEllipsisFollowNumPy) {
  const Tensor a = randn({2, 3}), b = randn({3, 4}), square = randn({3, 3});
  // Implicit output: the subscripts used once, alphabetically; a repeated one is summed.
  expect_close(einsum("ij,jk", {a, b}), matmul(a, b));
  expect_close(einsum("ba", {a}), a.t());
  expect_close(einsum("ii", {square}), trace(square));
  // The ellipsis broadcasts batch dims: [5, 1, 2, 3] x [4, 3, 4] -> [5, 4, 2, 4].
  const Tensor x = randn({5, 1, 2, 3}), y = randn({4, 3, 4});
  const Tensor z = einsum("...ij,...jk->...ik", {x, y});
  EXPECT_EQ(Shape(z.sizes()), Shape({5, 4, 2, 4}));
  expect_close(z, matmul(x, y));
  expect_close(einsum("...ij->...ji", {x}), x.transpose(-1, -2));
  // Spaces are ignored.
  const Tensor p = randn({2, 2, 3}), q = randn({2, 3, 1});
  expect_close(einsum("b i j , b j k -> b i k", {p, q}), matmul(p, q));
}

TEST(Einsum, BadEquationsNameTheFix) {
  const Tensor a = zeros({2, 3}), b = zeros({4, 5});
  expect_error([&] { einsum("ij,jk->ik", {a, b}); }, {"subscript 'j' has size 3 in one operand and 4"});
  expect_error([&] { einsum("ij->ik", {a}); }, {"output subscript 'k'", "appears in no operand"});
  expect_error([&] { einsum("ijk->i", {a}); }, {"has 3 subscript(s) but operand 0 is float32[2, 3]"});
  expect_error([&] { einsum("ij,jk->ik", {a}); }, {"2 operand term(s) but 1 tensor(s)"});
  expect_error([&] { einsum("i2->i", {zeros({2, 2})}); }, {"unexpected character '2'"});
  expect_error([&] { einsum("ij->ii", {a}); }, {"output subscript 'i' is repeated"});
  expect_error([&] { einsum("ii->i", {a}); }, {"subscript 'i' is repeated in one operand", "sizes 2 and 3"});
}

}  // namespace
}  // namespace kiln::testing
