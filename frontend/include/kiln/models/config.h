// Model configs as plain structs that list their fields once:
//
//   struct MLPConfig {
//     int64_t d_in = 784, d_hidden = 256;
//     template <class V> void fields(V& v) { v("d_in", d_in); v("d_hidden", d_hidden); }
//   };
//
// From that one list, config_to_json / config_from_json convert to and from JSON (the form
// stored in checkpoint metadata), so a saved model can be rebuilt from its file alone.
// Reading is strict: an unknown key, a value of the wrong type or a missing file field is
// a kiln::Error naming the key — a typo in a config never silently falls back to a default.
#pragma once

#include <cstdint>
#include <string>
#include <type_traits>

#include "kiln/error.h"
#include "kiln/serialize/json.h"

namespace kiln::models {

namespace detail {

template <class T>
json::Value field_to_json(const T& value) {
  if constexpr (std::is_same_v<T, bool>)
    return json::Value(value);
  else if constexpr (std::is_integral_v<T>)
    return json::Value(static_cast<int64_t>(value));
  else if constexpr (std::is_floating_point_v<T>)
    return json::Value(static_cast<double>(value));
  else
    return json::Value(std::string(value));
}

// Reads `value` into `out`; `where` names the config and key in errors.
template <class T>
void field_from_json(const json::Value& value, T& out, const std::string& where) {
  if constexpr (std::is_same_v<T, bool>) {
    KILN_CHECK(value.is_bool(), "[", where, "] expected true or false, found ",
               json::kind_name(value.kind()), ".");
    out = value.as_bool();
  } else if constexpr (std::is_integral_v<T>) {
    KILN_CHECK(value.is_int(), "[", where, "] expected an integer, found ",
               value.is_number() ? "the number " + json::dump(value) +
                                       ", written with a fraction or an exponent. Fix: write the "
                                       "integer's digits in full (1000000, not 1e6)"
                                 : std::string(json::kind_name(value.kind())),
               ".");
    out = static_cast<T>(value.as_int());
  } else if constexpr (std::is_floating_point_v<T>) {
    KILN_CHECK(value.is_number(), "[", where, "] expected a number, found ",
               json::kind_name(value.kind()), ".");
    out = static_cast<T>(value.as_double());
  } else {
    KILN_CHECK(value.is_string(), "[", where, "] expected a string, found ",
               json::kind_name(value.kind()), ".");
    out = value.as_string();
  }
}

}  // namespace detail

// {"d_in": 784, ...} in the order fields() lists them.
template <class Config>
json::Value config_to_json(const Config& config) {
  json::Object object;
  auto visit = [&](const char* key, const auto& value) {
    object.emplace_back(key, detail::field_to_json(value));
  };
  const_cast<Config&>(config).fields(visit);
  return json::Value(std::move(object));
}

// Starts from the defaults of Config and overrides every key present in `json` (a missing
// key keeps its default, so {"num_blocks": 8} is a valid config). `name` is the config's
// name in errors.
template <class Config>
Config config_from_json(const json::Value& json, const std::string& name) {
  Config config;
  if (json.is_null()) return config;
  KILN_CHECK(json.is_object(), "[", name, "] a config must be a JSON object, found ",
             json::kind_name(json.kind()), ".");
  std::string known;
  auto list_keys = [&](const char* key, const auto&) {
    known += known.empty() ? "" : ", ";
    known += key;
  };
  config.fields(list_keys);
  for (const auto& [key, value] : json.as_object()) {
    bool found = false;
    auto read = [&](const char* field, auto& out) {
      if (key != field) return;
      found = true;
      detail::field_from_json(value, out, name + "." + key);
    };
    config.fields(read);
    KILN_CHECK(found, "[", name, "] unknown config key '", key, "'. Known keys: ", known,
               ". Fix: correct the key's spelling, or remove it.");
  }
  return config;
}

}  // namespace kiln::models
