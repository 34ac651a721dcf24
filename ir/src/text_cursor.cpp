// The IR text form's tokens, read by the parser.
#include "text_cursor.h"

#include <algorithm>
#include <cctype>
#include <charconv>

#include "text_form.h"

namespace kiln::ir {

size_t TextCursor::here() {
  while (pos_ < text_.size()) {
    char c = text_[pos_];
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
      ++pos_;
    } else if (text_.substr(pos_, 2) == "//") {
      while (pos_ < text_.size() && text_[pos_] != '\n') ++pos_;
    } else {
      break;
    }
  }
  return pos_;
}

char TextCursor::peek() {
  return here() < text_.size() ? text_[pos_] : '\0';
}

bool TextCursor::accept(char c) {
  if (peek() != c) return false;
  ++pos_;
  return true;
}

void TextCursor::expect(char c, std::string_view what) {
  if (!accept(c)) fail_expected("'" + std::string(1, c) + "' " + std::string(what));
}

std::string_view TextCursor::peek_word() {
  size_t end = here();
  while (end < text_.size() && is_bare_word_char(text_[end])) ++end;
  return text_.substr(pos_, end - pos_);
}

bool TextCursor::accept_word(std::string_view w) {
  if (w.empty() || peek_word() != w) return false;
  pos_ += w.size();
  return true;
}

std::string_view TextCursor::word(std::string_view what) {
  std::string_view w = peek_word();
  if (w.empty()) fail_expected(what);
  pos_ += w.size();
  return w;
}

std::string_view TextCursor::token(std::string_view extra, std::string_view what) {
  size_t end = here();
  while (end < text_.size() &&
         (is_bare_word_char(text_[end]) || extra.find(text_[end]) != std::string_view::npos))
    ++end;
  if (end == pos_) fail_expected(what);
  std::string_view t = text_.substr(pos_, end - pos_);
  pos_ = end;
  return t;
}

std::string TextCursor::string_literal(std::string_view what) {
  if (peek() != '"') fail_expected(what);
  size_t start = pos_++;
  std::string out;
  while (pos_ < text_.size() && text_[pos_] != '"') {
    char c = text_[pos_++];
    if (c == '\\') {
      char e = pos_ < text_.size() ? text_[pos_++] : '\0';
      if (e != '"' && e != '\\' && e != 'n')
        fail_at(pos_ - 2, "expected an escape \\\", \\\\ or \\n in a string, found '\\", e, "'.");
      c = e == 'n' ? '\n' : e;
    }
    out += c;
  }
  if (pos_ >= text_.size()) fail_at(start, "unterminated string (expected a closing '\"').");
  ++pos_;
  return out;
}

std::string TextCursor::name(std::string_view what) {
  return peek() == '"' ? string_literal(what) : std::string(word(what));
}

int64_t TextCursor::integer(std::string_view what) {
  size_t start = here();
  std::string_view t = token("-", what);
  int64_t v = 0;
  auto res = std::from_chars(t.data(), t.data() + t.size(), v);
  if (res.ec != std::errc() || res.ptr != t.data() + t.size())
    fail_at(start, "expected ", what, ", found '", t, "'.");
  return v;
}

std::pair<int, size_t> TextCursor::value_id() {
  size_t start = here();
  if (!accept('%')) fail_expected("a value like %0");
  if (pos_ >= text_.size() || !std::isdigit(static_cast<unsigned char>(text_[pos_])))
    fail_expected("a value number after '%'");
  return {static_cast<int>(integer("a value number after '%'")), start};
}

std::string_view TextCursor::braced(std::string_view what) {
  size_t start = here();
  if (peek() != '{') fail_expected(what);
  int depth = 0;
  bool quoted = false;
  for (size_t end = start; end < text_.size(); ++end) {
    char c = text_[end];
    if (quoted) {
      if (c == '\\') {
        ++end;
      } else if (c == '"') {
        quoted = false;
      }
    } else if (c == '"') {
      quoted = true;
    } else if (c == '{' || c == '[' || c == '(') {
      ++depth;
    } else if ((c == '}' || c == ']' || c == ')') && --depth == 0) {
      pos_ = end + 1;
      return text_.substr(start, pos_ - start);
    }
  }
  fail_at(start, "unterminated '{' (expected a closing '}').");
}

std::string TextCursor::line_col(size_t pos) const {
  size_t line = 1, line_start = 0;
  for (size_t i = 0; i < pos && i < text_.size(); ++i) {
    if (text_[i] == '\n') line++, line_start = i + 1;
  }
  return "line " + std::to_string(line) + ", col " + std::to_string(pos - line_start + 1);
}

void TextCursor::fail_expected(std::string_view what) {
  fail_at(here(), "expected ", what, ", found ", found(), ".");
}

std::string TextCursor::found() {
  if (here() >= text_.size()) return "the end of the text";
  size_t end = pos_;
  while (end < text_.size() && is_bare_word_char(text_[end])) ++end;
  return "'" + std::string(text_.substr(pos_, std::max(end, pos_ + 1) - pos_)) + "'";
}

}  // namespace kiln::ir
