// TracedValue: the SymbolicInfo of a tensor a tracer recorded (which graph value it is and
// which tracer made it), and small helpers the tracer's files share.
#pragma once

#include <memory>
#include <string>

#include "tracer.h"

namespace kiln::detail {

// Shared by the tracer and its symbolic tensors: a tensor kept past the trace must not
// reach a tracer that is gone.
struct Tracer::State {
  Tracer* tracer = nullptr;  // null once the trace has finished
};

class TracedValue final : public SymbolicInfo {
 public:
  TracedValue(std::shared_ptr<Tracer::State> state, ir::Value* value)
      : state_(std::move(state)), value_(value) {}

  // A host read: the tracer decides (GraphBreakError, or a segment run); after the trace,
  // an error.
  void check_data_read(const char* what, SourceLoc loc) const override;
  void check_print() const override { check_data_read("printing the tensor", SourceLoc()); }
  std::string describe() const override;
  ir::Value* value() const { return value_; }
  bool belongs_to(const Tracer::State* s) const { return state_.get() == s; }

 private:
  std::shared_ptr<Tracer::State> state_;
  ir::Value* value_;  // valid while the tracer lives (its graph may be gone afterwards)
};

// The TracedValue of t, if t is a traced tensor.
const TracedValue* traced_info(const Tensor& t);
// The innermost module being called ("" for the root).
std::string current_module_path();
// "the root module" or "module 'blocks.0'".
std::string where_str(const std::string& path);

}  // namespace kiln::detail
