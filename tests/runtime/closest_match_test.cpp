// Did-you-mean suggestions: close typos and prefixes are suggested, unrelated words are not.
#include "kiln/closest_match.h"

#include <gtest/gtest.h>

namespace kiln {
namespace {

TEST(ClosestMatch, SuggestsTyposAndPrefixesOnly) {
  EXPECT_EQ(edit_distance("kitten", "sitting"), 3u);
  EXPECT_EQ(edit_distance("", "abc"), 3u);
  const std::vector<std::string> commands = {"train", "eval", "export", "explain"};
  EXPECT_EQ(closest_match("trian", commands), "train");   // a transposition: 2 edits
  EXPECT_EQ(closest_match("expain", commands), "explain");
  EXPECT_EQ(closest_match("exp", commands), "export");     // a prefix, the first that fits
  EXPECT_EQ(closest_match("summary", commands), "");       // nothing close
  EXPECT_EQ(closest_match("ev", commands), "eval");        // 2 edits is close for short words
  EXPECT_EQ(closest_match("x", {}), "");
  // Longer words allow more edits: a third of their length.
  EXPECT_EQ(closest_match("--max-trains", {"--max-train", "--max-test"}), "--max-train");
}

}  // namespace
}  // namespace kiln
