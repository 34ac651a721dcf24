// A small `--name value` option parser shared by the subcommands: unknown options, missing
// values and malformed numbers are errors that list what the command accepts.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "kiln/error.h"

namespace kiln::cli {

class Args {
 public:
  // `known` lists the accepted options without their dashes ("epochs"); `flags` the ones
  // that take no value ("no-save").
  Args(std::string command, const std::vector<std::string>& args, std::vector<std::string> known,
       std::vector<std::string> flags = {});

  bool has(const std::string& name) const { return values_.count(name) != 0; }
  std::string str(const std::string& name, const std::string& fallback) const;
  int64_t integer(const std::string& name, int64_t fallback) const;
  double number(const std::string& name, double fallback) const;
  // Present and positive (epochs, batch sizes).
  int64_t positive(const std::string& name, int64_t fallback) const;

 private:
  std::string command_;
  std::map<std::string, std::string> values_;
};

}  // namespace kiln::cli
