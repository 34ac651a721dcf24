// The CPU backend's entry point for the layers above.
#pragma once

namespace kiln::cpu::kernels {

// Fills the CPU kernel slot of every op in the table. Idempotent.
void register_kernels();

// Leaves OpenBLAS single-threaded with its idle worker threads stopped: kiln calls it from
// its own pool, and an idle OpenBLAS worker spins in sched_yield beside kiln's threads.
// register_kernels() does it once; call it again after code that asked OpenBLAS for
// threads of its own.
void keep_openblas_single_threaded();

}  // namespace kiln::cpu::kernels
