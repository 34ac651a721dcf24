// TextCursor: the tokens of the IR text form (words, strings, integers, value numbers,
// bracketed attributes) read from a position that error messages turn into line:column.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

#include "kiln/error.h"

namespace kiln::ir {

class TextCursor {
 public:
  explicit TextCursor(std::string_view text) : text_(text) {}

  // Skips whitespace and `//` comments; the position of the next token.
  size_t here();
  bool at_end() { return here() >= text_.size(); }
  char peek();  // the next token's first character, '\0' at the end
  bool accept(char c);
  void expect(char c, std::string_view what);  // what: "after the value list"

  // Words are runs of [A-Za-z0-9_.] (op names, keywords, bare names and paths).
  std::string_view peek_word();
  bool accept_word(std::string_view w);
  std::string_view word(std::string_view what);
  // A run of word characters and `extra` ones (sizes "s0*4", elements "-1e-05", devices).
  std::string_view token(std::string_view extra, std::string_view what);
  std::string string_literal(std::string_view what);  // "..." with \" \\ \n escapes
  std::string name(std::string_view what);            // a word or a string
  int64_t integer(std::string_view what);
  std::pair<int, size_t> value_id();  // `%12` -> {12, position of the '%'}
  // '{' ... '}' as written, with nested brackets and quoted strings (op attributes).
  std::string_view braced(std::string_view what);

  std::string line_col(size_t pos) const;  // "line 3, col 14"
  size_t remaining() const { return text_.size() - pos_; }  // characters left to read
  template <class... Parts>
  [[noreturn]] void fail_at(size_t pos, const Parts&... parts) const {
    KILN_FAIL("[ir parse] ", line_col(pos), ": ", parts...);
  }
  // "expected <what>, found <the next token>".
  [[noreturn]] void fail_expected(std::string_view what);

 private:
  std::string found();

  std::string_view text_;
  size_t pos_ = 0;
};

}  // namespace kiln::ir
