// The CPU backend's entry point for the layers above.
#pragma once

namespace kiln::cpu {

// Fills the CPU kernel slot of every op in the table. Idempotent.
void register_cpu_kernels();

}  // namespace kiln::cpu
