// Location (location.h): plain and deferred source locations.
#include "kiln/ir/location.h"

#include <atomic>
#include <mutex>

namespace kiln::ir {

struct Location::Deferred {
  std::once_flag once;
  std::function<Location()> resolve;
  Location value;
  std::atomic<bool> done{false};
};

Location Location::deferred(std::function<Location()> resolve) {
  Location loc;
  loc.deferred_ = std::make_shared<Deferred>();
  loc.deferred_->resolve = std::move(resolve);
  return loc;
}

const Location& Location::resolve_now() const {
  Deferred& d = *deferred_;
  std::call_once(d.once, [&] {
    d.value = d.resolve();
    d.resolve = nullptr;
    d.done.store(true, std::memory_order_release);
  });
  return d.value.resolved();
}

bool Location::is_pending() const {
  return deferred_ && !deferred_->done.load(std::memory_order_acquire);
}

bool Location::operator==(const Location& other) const {
  return file() == other.file() && line() == other.line() && function() == other.function();
}

std::string location_str(const Location& loc) {
  if (!loc.known()) return "";
  std::string out = loc.file() + ':' + std::to_string(loc.line());
  if (!loc.function().empty()) out += " (" + loc.function() + ")";
  return out;
}

}  // namespace kiln::ir
