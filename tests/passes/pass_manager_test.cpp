// PassManager: the pipeline text (normal form, whitespace, every syntax error with its
// column), pass options, the registry, verification after each pass, dumps and the report.
#include "kiln/passes/pass_manager.h"

#include <gtest/gtest.h>

#include <regex>

#include "passes/pass_test_util.h"
#include "test_util.h"

namespace kiln::passes {
namespace {

using testing::expect_same_results;

const char* kSmall =
    "graph g {\n"
    "  input %0 \"x\": float32[4]\n"
    "  const %1 \"one\": float32[4] = [1, 1, 1, 1]\n"
    "  %2: float32[4] = relu(%0) {}\n"
    "  %3: float32[4] = mul(%2, %1) {}\n"
    "  %4: float32[4] = exp(%3) {}\n"
    "  %5: float32[4] = neg(%2) {}\n"
    "  return %4\n"
    "}\n";

TEST(PassManager, DefaultPipelineAndRegistry) {
  EXPECT_EQ(default_pipeline(), "canonicalize,decompose,dce,cse,fuse");
  EXPECT_EQ(PassManager(default_pipeline()).pipeline(), default_pipeline());
  const auto& passes = registered_passes();
  ASSERT_GE(passes.size(), 5u);
  EXPECT_EQ(passes[0].name, "canonicalize");
  EXPECT_EQ(passes[1].name, "decompose");
  EXPECT_EQ(passes[2].name, "dce");
  EXPECT_EQ(passes[3].name, "cse");
  EXPECT_EQ(passes[4].name, "fuse");
  ASSERT_NE(find_pass("fuse"), nullptr);
  EXPECT_EQ(find_pass("fuse")->description,
            "groups elementwise ops, and reductions over the last dim with the ops around them, "
            "into fused kernels");
  ASSERT_GE(passes.size(), 6u);
  EXPECT_EQ(passes[5].name, "specialize") << "registered, outside the default pipeline";
  EXPECT_EQ(find_pass("fsue"), nullptr);
  for (const PassInfo& info : passes) {
    EXPECT_FALSE(info.description.empty()) << info.name;
    EXPECT_EQ(info.create(PassOptions())->name(), info.name);
  }
}

TEST(PassManager, ReadsWhitespaceAndOptionsIntoANormalForm) {
  PassManager pm(" canonicalize { max-iterations = 3 ,fold-max-elements=10 } ,\n dce,cse\t");
  EXPECT_EQ(pm.pipeline(), "canonicalize{fold-max-elements=10,max-iterations=3},dce,cse");
  EXPECT_EQ(PassManager(pm.pipeline()).pipeline(), pm.pipeline());
  EXPECT_EQ(PassManager("dce{}").pipeline(), "dce");
}

TEST(PassManager, TheEmptyPipelineRunsNothing) {
  std::unique_ptr<ir::Graph> g = testing::parse(kSmall);
  PassReport report = PassManager(" ").run(*g);
  EXPECT_TRUE(report.passes.empty());
  EXPECT_EQ(report.str(), "");
  EXPECT_EQ(ir::print_graph(*g), kSmall);
}

TEST(PassManager, NamesAnUnknownPassWithItsColumnAndTheKnownOnes) {
  expect_error([] { PassManager("canonicalize, fsue"); },
               {"[passes] pipeline \"canonicalize, fsue\" at column 15: expected a known pass "
                "(canonicalize, decompose, dce, cse, fuse",
                "found unknown pass 'fsue'", "Fix: correct the spelling"});
}

TEST(PassManager, NamesEachSyntaxErrorWithItsColumn) {
  expect_error([] { PassManager("dce,,cse"); },
               {"at column 5: expected a pass name, found ',cse'"});
  expect_error([] { PassManager("dce,"); },
               {"at column 5: expected a pass name, found the end of the text"});
  expect_error([] { PassManager("dce cse"); },
               {"at column 5: expected ',' between passes, found 'cse'"});
  expect_error([] { PassManager("canonicalize{max-iterations}"); },
               {"at column 28: expected '=' after option 'max-iterations', found '}'"});
  expect_error([] { PassManager("canonicalize{max-iterations=2"); },
               {"at column 30: expected ',' or '}' after the value of option 'max-iterations', "
                "found the end of the text"});
  expect_error([] { PassManager("canonicalize{max-iterations= }"); },
               {"at column 30: expected a value for option 'max-iterations', found '}'"});
  expect_error([] { PassManager("canonicalize{=2}"); },
               {"at column 14: expected an option name, found '=2}'"});
  expect_error([] { PassManager("canonicalize{max-iterations=1, max-iterations=2}"); },
               {"at column 32: option 'max-iterations' of pass 'canonicalize' is given twice",
                "Fix: give each option once"});
}

TEST(PassManager, PassOptionsReadIntegersAndBooleans) {
  PassOptions o({{"n", "12"},
                 {"neg", "-3"},
                 {"bad", "1x"},
                 {"empty", ""},
                 {"on", "true"},
                 {"off", "0"},
                 {"maybe", "yes"}});
  EXPECT_EQ(o.get_int("p", "n", 0), 12);
  EXPECT_EQ(o.get_int("p", "neg", 0), -3);
  EXPECT_EQ(o.get_int("p", "absent", 7), 7);
  EXPECT_TRUE(o.get_bool("p", "on", false));
  EXPECT_FALSE(o.get_bool("p", "off", true));
  EXPECT_TRUE(o.get_bool("p", "absent", true));
  expect_error([&] { o.get_int("p", "bad", 0); },
               {"[passes] option 'bad' of pass 'p' expected an integer, found '1x'",
                "Fix: write p{bad=16}"});
  expect_error([&] { o.get_int("p", "empty", 0); }, {"expected an integer, found ''"});
  expect_error([&] { o.get_bool("p", "maybe", false); },
               {"[passes] option 'maybe' of pass 'p' expected true or false, found 'yes'"});
}

TEST(PassManager, RejectsOptionsAPassDoesNotKnow) {
  PassOptions o({{"a", "1"}, {"b", "2"}});
  o.check_known("p", {"a", "b", "c"});
  expect_error(
      [&] {
        o.check_known("p", {"a", "c"});
      },
      {"[passes] pass 'p' has no option 'b'; it knows: a, c",
       "Fix: remove the option or correct its spelling"});
  expect_error([] { PassManager("dce{aggressive=true}"); },
               {"pass 'dce' has no option 'aggressive'; it takes no options"});
  expect_error([] { PassManager("cse{x=1}"); }, {"pass 'cse' has no option 'x'"});
}

// A pass that breaks the graph, to check that verify_each names it.
class BreakTypes : public Pass {
 public:
  std::string_view name() const override { return "test-break-types"; }
  bool run(ir::Graph& g, const PassContext&) override {
    g.mutable_nodes().front()->outputs[0]->type.shape = {99};
    return true;
  }
};

void register_break_types() {
  static bool registered = [] {
    register_pass({"test-break-types", "breaks the first node's type (tests)",
                   [](const PassOptions&) -> std::unique_ptr<Pass> {
                     return std::make_unique<BreakTypes>();
                   }});
    return true;
  }();
  (void)registered;
}

TEST(PassManager, VerifyEachNamesThePassThatBrokeTheGraph) {
  register_break_types();
  PipelineOptions options;
  options.verify_each = true;
  PassManager pm("dce,test-break-types,cse", options);
  std::unique_ptr<ir::Graph> g = testing::parse(kSmall);
  expect_error([&] { pm.run(*g); },
               {"[passes] pass 'test-break-types' left an invalid graph: [ir verify] relu %2",
                "has type float32[99] but relu infers float32[4]"});
  // Without verification the broken graph goes through.
  g = testing::parse(kSmall);
  PassManager("test-break-types").run(*g);
}

TEST(PassManager, VerifyEachChecksTheInputGraphFirst) {
  std::unique_ptr<ir::Graph> g = testing::parse(kSmall);
  g->mutable_nodes()[1]->outputs[0]->type.shape = {5};
  PipelineOptions options;
  options.verify_each = true;
  expect_error([&] { PassManager("dce", options).run(*g); },
               {"[passes] expected a valid graph before pass 'dce', found: [ir verify] mul %3"});
}

TEST(PassManager, RegisterPassRejectsTakenNamesAndMissingFactories) {
  expect_error(
      [] {
        register_pass({"dce", "again", find_pass("dce")->create});
      },
      {"[passes] register_pass expected a new pass name, found 'dce', which is already "
       "registered"});
  expect_error(
      [] {
        register_pass({"test-no-factory", "none", nullptr});
      },
      {"[passes] register_pass expected a name and a factory, found name "
       "'test-no-factory' and no factory"});
  EXPECT_EQ(find_pass("test-no-factory"), nullptr);
}

TEST(PassManager, PrintsAfterTheNamedPassOrAll) {
  std::vector<std::pair<std::string, std::string>> printed;
  PipelineOptions options;
  options.print_after = "dce";
  options.print_sink = [&](std::string_view pass, const std::string& text) {
    printed.emplace_back(std::string(pass), text);
  };
  std::unique_ptr<ir::Graph> g = testing::parse(kSmall);
  PassManager("canonicalize,dce,cse", options).run(*g);
  ASSERT_EQ(printed.size(), 1u);
  EXPECT_EQ(printed[0].first, "dce");
  EXPECT_EQ(printed[0].second, ir::print_graph(*g));
  EXPECT_EQ(printed[0].second.find("neg"), std::string::npos);

  printed.clear();
  options.print_after = "all";
  g = testing::parse(kSmall);
  PassManager("canonicalize,dce,cse", options).run(*g);
  ASSERT_EQ(printed.size(), 3u);
  EXPECT_EQ(printed[0].first, "canonicalize");
  EXPECT_NE(printed[0].second.find("neg"), std::string::npos);  // dce has not run yet
  EXPECT_EQ(printed[2].first, "cse");
}

TEST(PassManager, PrintsToStderrWithoutASink) {
  PipelineOptions options;
  options.print_after = "dce";
  std::unique_ptr<ir::Graph> g = testing::parse(kSmall);
  ::testing::internal::CaptureStderr();
  PassManager("dce", options).run(*g);
  std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(err, "// after dce\n" + ir::print_graph(*g));
}

TEST(PassManager, RejectsPrintAfterAnUnknownPass) {
  PipelineOptions options;
  options.print_after = "fusion";
  expect_error([&] { PassManager("dce", options); },
               {"[passes] print_after expected \"all\", \"\" or a pass name, found 'fusion'"});
}

TEST(PassManager, ReportsEachPass) {
  std::unique_ptr<ir::Graph> g = testing::parse(kSmall);
  PassReport report = PassManager("canonicalize,dce,cse").run(*g);
  ASSERT_EQ(report.passes.size(), 3u);
  const PassTiming& canon = report.passes[0];
  const PassTiming& dce = report.passes[1];
  const PassTiming& cse = report.passes[2];
  EXPECT_EQ(canon.name, "canonicalize");
  EXPECT_TRUE(canon.changed);
  EXPECT_EQ(canon.nodes_before, 4u);
  EXPECT_EQ(canon.nodes_after, 4u);
  EXPECT_EQ(canon.summary, "1 rewrite, 0 folded constants");
  EXPECT_TRUE(dce.changed);
  EXPECT_EQ(dce.nodes_after, 2u);
  EXPECT_EQ(dce.summary, "removed 2 nodes");
  EXPECT_FALSE(cse.changed);
  EXPECT_GE(report.total_ms, 0.0);
  std::string text = report.str();
  EXPECT_TRUE(std::regex_match(
      text, std::regex(R"(canonicalize \d+\.\d\d ms, dce \d+\.\d\d ms \(4 -> 2 nodes\), )"
                       R"(cse \d+\.\d\d ms)")))
      << text;
}

TEST(PassManager, TheDefaultPipelineKeepsResults) {
  const char* ir =
      "graph g {\n"
      "  input %0 \"x\": float32[s0, 4]\n"
      "  param %1 \"w\": float32[4, 4]\n"
      "  const %2 \"one\": float32[4] = [1, 1, 1, 1]\n"
      "  const %3 \"b\": float32[4] = [0.25, -1, 3, 0]\n"
      "  %4: float32[s0, 4] = matmul(%0, %1) {}\n"
      "  %5: float32[s0, 4] = mul(%4, %2) {}\n"
      "  %6: float32[4] = mul(%3, %3) {}\n"
      "  %7: float32[s0, 4] = add(%5, %6) {}\n"
      "  %8: float32[s0, 4] = tanh(%7) {}\n"
      "  %9: float32[s0, 4] = tanh(%7) {}\n"
      "  %10: float32[s0, 4] = mul(%8, %9) {}\n"
      "  %11: float32[s0, 4] = relu(%10) {}\n"
      "  %12: float32[s0] = sum(%11) {dims=[1], keepdim=false}\n"
      "  %13: float32[s0, 4] = exp(%0) {}\n"
      "  return %12\n"
      "}\n";
  expect_same_results(default_pipeline(), ir);
}

}  // namespace
}  // namespace kiln::passes
