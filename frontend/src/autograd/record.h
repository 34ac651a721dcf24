// Installs the autograd recorder into dispatch (done once by kiln::init()).
#pragma once

#include <cstdint>

namespace kiln::autograd {

void install_autograd_hook();
uint64_t next_sequence_nr();

}  // namespace kiln::autograd
