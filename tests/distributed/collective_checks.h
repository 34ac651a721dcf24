// The collective checks every backend passes (tests/distributed/collectives_test.cpp for gloo,
// nccl_test.cpp for nccl): every rank a thread of this process with its own group over one
// shared TcpStore; every op x dtype x size, including sizes that do not divide by the group
// size, each result against a plain reference.
#pragma once

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "kiln/distributed.h"
#include "kiln/kiln.h"

namespace kiln::distributed::testing_support {

// Runs fn(group) on `world` threads, each with its own group of `backend`; rethrows the first
// failure, naming its rank.
inline void run_ranks(const std::string& backend, int world, const std::function<void(ProcessGroup&)>& fn,
                      Milliseconds timeout = std::chrono::seconds(20)) {
  static std::atomic<int> job{0};
  std::string prefix = "job" + std::to_string(job++);
  auto store = std::make_shared<TcpStore>(TcpStoreOptions{.host = "127.0.0.1", .port = 0, .is_server = true});
  std::vector<std::exception_ptr> errors(world);
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r)
    threads.emplace_back([&, r] {
      try {
        auto group = new_group(backend, r, world, store, timeout, prefix);
        fn(*group);
      } catch (...) {
        errors[r] = std::current_exception();
      }
    });
  for (auto& t : threads) t.join();
  for (int r = 0; r < world; ++r)
    if (errors[r]) {
      try {
        std::rethrow_exception(errors[r]);
      } catch (const std::exception& e) {
        FAIL() << "rank " << r << ": " << e.what();
      }
    }
}

inline const std::vector<DType> kAllDTypes = {DType::Bool,     DType::Int32,   DType::Int64, DType::Float16,
                                              DType::BFloat16, DType::Float32, DType::Float64};
inline const std::vector<int64_t> kSizes = {1, 7, 1000, 1001, 70001};

// Small integers, exact in every dtype: rank r, element i.
inline double value(int r, int64_t i, ReduceOp op) {
  if (op == ReduceOp::Product) return 1 + (r + i) % 2;           // 1 or 2: no overflow
  return static_cast<double>((i * 7 + r * 3) % 11) - 3;          // -3 .. 7
}

inline Tensor make_input(DType dtype, int64_t n, int r, ReduceOp op, Device device = kCPU) {
  std::vector<double> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = value(r, i, op);
  return Tensor::from_vector(v, {n}).to(dtype).to(device);
}

inline double reduce_reference(DType dtype, ReduceOp op, int world, int64_t i) {
  double acc = value(0, i, op);
  bool any = acc != 0, all = acc != 0;
  for (int r = 1; r < world; ++r) {
    double x = value(r, i, op);
    any = any || x != 0;
    all = all && x != 0;
    switch (op) {
      case ReduceOp::Sum:
      case ReduceOp::Avg: acc += x; break;
      case ReduceOp::Product: acc *= x; break;
      case ReduceOp::Max: acc = std::max(acc, x); break;
      case ReduceOp::Min: acc = std::min(acc, x); break;
    }
  }
  if (dtype == DType::Bool) return (op == ReduceOp::Sum || op == ReduceOp::Max) ? any : all;
  if (op == ReduceOp::Avg) return is_floating(dtype) ? acc / world : std::trunc(acc / world);
  return acc;
}

inline std::vector<double> as_doubles(const Tensor& t) { return t.to(kCPU).to(DType::Float64).to_vector<double>(); }

inline void check_all_reduce_every_op_dtype_and_size(const std::string& backend, int world, Device device) {
  run_ranks(backend, world, [&](ProcessGroup& g) {
    for (DType dtype : kAllDTypes)
      for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Avg, ReduceOp::Max, ReduceOp::Min, ReduceOp::Product})
        for (int64_t n : kSizes) {
          if (dtype == DType::Bool && op == ReduceOp::Avg) continue;
          Tensor t = make_input(dtype, n, g.rank(), op, device);
          g.all_reduce(t, op);
          ASSERT_EQ(t.dtype(), dtype);
          std::vector<double> got = as_doubles(t);
          // Avg divides: exact only for integers; float rounding otherwise.
          double tolerance = !(op == ReduceOp::Avg && is_floating(dtype)) ? 0
                             : itemsize(dtype) == 2                      ? 0.02
                             : itemsize(dtype) == 4                      ? 1e-6
                                                                         : 1e-14;
          for (int64_t i = 0; i < n; ++i) {
            double want = reduce_reference(dtype, op, world, i);
            if (dtype == DType::BFloat16 || dtype == DType::Float16)  // the reference, rounded alike
              want = Tensor::from_vector(std::vector<double>{want}, {1}).to(dtype).to(DType::Float64).item<double>();
            ASSERT_NEAR(got[i], want, tolerance * std::max(1.0, std::abs(want)))
                << dtype_name(dtype) << " " << reduce_op_name(op) << " n=" << n << " i=" << i << " rank " << g.rank();
          }
        }
  });
}

inline void check_broadcast_from_every_root(const std::string& backend, int world, Device device) {
  run_ranks(backend, world, [&](ProcessGroup& g) {
    for (int root = 0; root < world; ++root)
      for (DType dtype : kAllDTypes)
        for (int64_t n : {int64_t{1}, int64_t{1001}}) {
          Tensor t = make_input(dtype, n, g.rank(), ReduceOp::Sum, device);
          Tensor want = make_input(dtype, n, root, ReduceOp::Sum);
          g.broadcast(t, root);
          ASSERT_EQ(as_doubles(t), as_doubles(want)) << dtype_name(dtype) << " root " << root;
        }
  });
}

inline void check_all_gather_uneven_and_into_tensor(const std::string& backend, int world, Device device) {
  run_ranks(backend, world, [&](ProcessGroup& g) {
    for (DType dtype : kAllDTypes) {
      // Rank r contributes r + 1 rows of 3.
      Tensor mine = make_input(dtype, (g.rank() + 1) * 3, g.rank(), ReduceOp::Sum, device).reshape({g.rank() + 1, 3});
      std::vector<Tensor> outputs;
      for (int r = 0; r < world; ++r) outputs.push_back(zeros({r + 1, 3}, TensorOptions(dtype).with_device(device)));
      g.all_gather(outputs, mine);
      for (int r = 0; r < world; ++r)
        ASSERT_EQ(as_doubles(outputs[r]), as_doubles(make_input(dtype, (r + 1) * 3, r, ReduceOp::Sum)))
            << dtype_name(dtype) << " from rank " << r;
      Tensor even = make_input(dtype, 5, g.rank(), ReduceOp::Sum, device);
      Tensor stacked = zeros({world * 5}, TensorOptions(dtype).with_device(device));
      g.all_gather_into_tensor(stacked, even);
      for (int r = 0; r < world; ++r)
        ASSERT_EQ(as_doubles(stacked.narrow(0, r * 5, 5)), as_doubles(make_input(dtype, 5, r, ReduceOp::Sum)));
    }
  });
}

inline void check_reduce_scatter_uneven_and_tensor(const std::string& backend, int world, Device device) {
  run_ranks(backend, world, [&](ProcessGroup& g) {
    for (DType dtype : {DType::Int32, DType::Int64, DType::Float32, DType::Float64, DType::BFloat16})
      for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Max, ReduceOp::Avg}) {
        // Part r has 2r + 1 elements: no even split.
        std::vector<Tensor> parts;
        int64_t start = 0;
        Tensor full = make_input(dtype, world * world + 10, g.rank(), op, device);
        for (int r = 0; r < world; ++r) {
          parts.push_back(full.narrow(0, start, 2 * r + 1).contiguous());
          start += 2 * r + 1;
        }
        Tensor out = zeros({2 * g.rank() + 1}, TensorOptions(dtype).with_device(device));
        g.reduce_scatter(out, parts, op);
        int64_t mine = g.rank() * g.rank();  // sum of 2r + 1 for r < rank
        std::vector<double> got = as_doubles(out);
        for (int64_t i = 0; i < out.numel(); ++i)
          ASSERT_NEAR(got[i], reduce_reference(dtype, op, world, mine + i), op == ReduceOp::Avg ? 0.02 : 0)
              << dtype_name(dtype) << " " << reduce_op_name(op);
        Tensor input = make_input(dtype, world * 4, g.rank(), op, device);
        Tensor shard = zeros({4}, TensorOptions(dtype).with_device(device));
        g.reduce_scatter_tensor(shard, input, op);
        std::vector<double> s = as_doubles(shard);
        for (int64_t i = 0; i < 4; ++i)
          ASSERT_NEAR(s[i], reduce_reference(dtype, op, world, g.rank() * 4 + i), op == ReduceOp::Avg ? 0.02 : 0);
      }
  });
}

}  // namespace kiln::distributed::testing_support
