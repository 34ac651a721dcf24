// Eigen array views over kiln buffers, shared by the vectorized kernels.
#pragma once

#include <Eigen/Core>

namespace kiln::cpu::kernels {

template <class T>
using EigenArray = Eigen::Array<T, Eigen::Dynamic, 1>;
template <class T>
using ArrayMap = Eigen::Map<EigenArray<T>>;
template <class T>
using ConstArrayMap = Eigen::Map<const EigenArray<T>>;

}  // namespace kiln::cpu::kernels
