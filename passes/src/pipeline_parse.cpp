// Reads the pipeline text. Grammar (whitespace allowed between tokens):
//   pipeline := (stage (',' stage)*)?
//   stage    := ID ('{' (option (',' option)*)? '}')?
//   option   := ID '=' VALUE        ID: [A-Za-z0-9_.-]+; VALUE: up to the next ',' or '}'
#include "pipeline_parse.h"

#include <map>

#include "kiln/error.h"

namespace kiln::passes {
namespace {

bool is_id_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '-' || c == '.';
}

bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

std::string known_passes() {
  std::string out;
  for (const PassInfo& info : registered_passes())
    out += (out.empty() ? "" : ", ") + std::string(info.name);
  return out;
}

class PipelineReader {
 public:
  explicit PipelineReader(std::string_view text) : text_(text) {}

  std::vector<PipelineStage> read() {
    std::vector<PipelineStage> stages;
    skip_space();
    if (at_end()) return stages;
    while (true) {
      stages.push_back(stage());
      skip_space();
      if (at_end()) return stages;
      expect(',', "',' between passes");
    }
  }

 private:
  PipelineStage stage() {
    skip_space();
    size_t column = pos_;
    std::string name = id("a pass name");
    PipelineStage s;
    s.info = find_pass(name);
    if (!s.info)
      fail_at(column,
              "expected a known pass (" + known_passes() + "), found unknown pass '" + name + "'",
              "correct the spelling or use one of the known passes");
    skip_space();
    if (peek() == '{') s.options = options(name);
    return s;
  }

  PassOptions options(const std::string& pass) {
    ++pos_;  // '{'
    std::map<std::string, std::string> values;
    skip_space();
    if (peek() == '}') {
      ++pos_;
      return PassOptions(std::move(values));
    }
    while (true) {
      skip_space();
      size_t column = pos_;
      std::string key = id("an option name");
      skip_space();
      expect('=', "'=' after option '" + key + "'");
      skip_space();
      size_t start = pos_;
      while (!at_end() && text_[pos_] != ',' && text_[pos_] != '}' && text_[pos_] != '{' &&
             text_[pos_] != '=')
        ++pos_;
      std::string_view value = text_.substr(start, pos_ - start);
      while (!value.empty() && is_space(value.back())) value.remove_suffix(1);
      if (value.empty())
        fail_at(start, "expected a value for option '" + key + "', found " + found_at(pos_),
                "write " + key + "=VALUE");
      if (!values.emplace(key, std::string(value)).second)
        fail_at(column, "option '" + key + "' of pass '" + pass + "' is given twice",
                "give each option once");
      skip_space();
      if (peek() == '}') {
        ++pos_;
        return PassOptions(std::move(values));
      }
      expect(',', "',' or '}' after the value of option '" + key + "'");
    }
  }

  std::string id(const std::string& what) {
    size_t start = pos_;
    while (!at_end() && is_id_char(text_[pos_])) ++pos_;
    if (pos_ == start)
      fail_at(start, "expected " + what + ", found " + found_at(start),
              "write the pipeline as a,b{key=value},c");
    return std::string(text_.substr(start, pos_ - start));
  }

  void expect(char c, const std::string& what) {
    if (peek() != c)
      fail_at(pos_, "expected " + what + ", found " + found_at(pos_),
              "write the pipeline as a,b{key=value},c");
    ++pos_;
  }

  // "'fuse{max-o'" or "the end of the text": what stands at `pos`.
  std::string found_at(size_t pos) const {
    return pos >= text_.size() ? "the end of the text"
                               : "'" + std::string(text_.substr(pos, 12)) + "'";
  }

  [[noreturn]] void fail_at(size_t pos, const std::string& problem, const std::string& fix) const {
    KILN_FAIL("[passes] pipeline \"", text_, "\" at column ", pos + 1, ": ", problem,
              ". Fix: ", fix, ".");
  }

  void skip_space() {
    while (!at_end() && is_space(text_[pos_])) ++pos_;
  }
  bool at_end() const { return pos_ >= text_.size(); }
  char peek() const { return at_end() ? '\0' : text_[pos_]; }

  std::string_view text_;
  size_t pos_ = 0;
};

}  // namespace

std::vector<PipelineStage> parse_pipeline(std::string_view text) {
  return PipelineReader(text).read();
}

}  // namespace kiln::passes
