// Did-you-mean suggestions: the known name closest to a mistyped one, for the errors of the
// IR parser, the model catalog and the command-line tool.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace kiln {

// Levenshtein distance: insertions, deletions and substitutions of one character each.
size_t edit_distance(std::string_view a, std::string_view b);

// The candidate closest to `word` when it is close enough to be a likely typo (at most
// max(2, |word| / 3) edits away, or `word` is a prefix of it of 3 or more characters);
// "" otherwise.
std::string closest_match(std::string_view word, const std::vector<std::string>& candidates);

}  // namespace kiln
