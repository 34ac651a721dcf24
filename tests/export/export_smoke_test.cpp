// Smoke test of export -> kiln_rt on FashionMLP.
#include <gtest/gtest.h>

#include <filesystem>

#include "kiln/export.h"
#include "kiln/kiln.h"
#include "kiln_rt.hpp"
#include "test_util.h"

namespace kiln {
namespace {

TEST(ExportSmoke, FashionMlpDynamicBatch) {
  manual_seed(3);
  auto model = models::build(models::FashionMLPConfig{12, 16, 5, 0.3});
  model->eval();
  Generator gen(7);
  Tensor x = randn({4, 12}, {}, &gen);
  std::string dir = ::testing::TempDir() + "/export_smoke.kiln";
  ExportOptions options;
  options.dynamic_batch = true;
  ExportResult r = export_model(model, {x}, dir, options);
  std::cout << r.summary();
  kiln_rt::Model rt(dir);
  for (int64_t batch : {1, 2, 5}) {
    Tensor in = randn({batch, 12}, {}, &gen);
    Tensor want = (*model)(in);
    kiln_rt::Outputs out = rt.run({kiln_rt::Model::input(in.data_ptr<float>(), {batch, 12})});
    ASSERT_EQ(out.shape(0), std::vector<int64_t>({batch, 5}));
    std::vector<float> w = want.to_vector<float>();
    for (size_t i = 0; i < w.size(); ++i) EXPECT_NEAR(out.data<float>(0)[i], w[i], 1e-5);
  }
}

}  // namespace
}  // namespace kiln
