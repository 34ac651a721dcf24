// kiln::init(): fills the op table's kernel and vjp slots and installs autograd. Every
// op function calls it on first use, so users never need to; it is idempotent.
#pragma once

namespace kiln {

void init();

}  // namespace kiln
