// test_progress.cpp — fx::Progress, the training display: the bar redrawn in place on a terminal
// (forced here with .terminal, since a test's stdout is not one), clearing it for a loop's own
// line, the rate in items counted after the first step, and silence outside a terminal with
// .terminal_only. fx::train's plain-line output is tested in test_train.cpp.
#include <gtest/gtest.h>

#include <chrono>
#include <regex>
#include <sstream>
#include <string>
#include <thread>

#include "fluxion/progress.hpp"

namespace fx = fluxion;

namespace {

// Redraws happen at most ten times a second: wait past that before the step that should draw.
void wait_for_redraw() { std::this_thread::sleep_for(std::chrono::milliseconds(150)); }

TEST(Progress, RedrawsOneLineWithBarRateTimeLeftAndRunningLoss) {
    std::ostringstream out;
    fx::Progress p({.epochs = 3, .steps = 4, .unit = "images", .out = &out, .terminal = true});
    EXPECT_TRUE(p.redraws());
    p.step(2, 1, 1.0, 64);
    wait_for_redraw();
    p.step(2, 2, 3.0, 64);
    const std::string text = out.str();
    EXPECT_EQ(text.rfind("\r\033[K", 0), 0u) << "each draw starts by erasing the line: " << text;
    EXPECT_EQ(text.find('\n'), std::string::npos) << "a running bar does not end its line: " << text;
    EXPECT_NE(text.find("epoch 2/3 [============            ] 2/4 steps"), std::string::npos) << text;
    EXPECT_NE(text.find("loss 2"), std::string::npos) << "the mean of 1 and 3: " << text;
    EXPECT_NE(text.find("eta "), std::string::npos) << text;

    // The clock starts when the first step ends, so only the second step's 64 images count:
    // at least 150 ms passed, so the rate is at most 64 / 0.15 ≈ 427 images/s.
    std::smatch m;
    ASSERT_TRUE(std::regex_search(text, m, std::regex(R"(([0-9]+) images/s)"))) << text;
    EXPECT_GT(std::stoi(m[1].str()), 0);
    EXPECT_LE(std::stoi(m[1].str()), 427) << text;
}

TEST(Progress, ClearErasesTheBarSoThatTheLoopPrintsItsOwnLine) {
    std::ostringstream out;
    fx::Progress p({.epochs = 1, .steps = 2, .out = &out, .terminal = true});
    p.step(1, 1, 0.5);
    wait_for_redraw();
    p.step(1, 2, 0.5);
    p.clear();
    const std::string text = out.str();
    ASSERT_GE(text.size(), 4u);
    EXPECT_EQ(text.substr(text.size() - 4), "\r\033[K") << text;
    EXPECT_EQ(text.find('\n'), std::string::npos) << text;
    p.clear();
    EXPECT_EQ(out.str(), text) << "clearing twice writes nothing more";
}

TEST(Progress, EndEpochLeavesTheFinishedBarOnItsOwnLine) {
    std::ostringstream out;
    {
        fx::Progress p({.epochs = 1, .steps = 2, .out = &out, .terminal = true});
        p.step(1, 1, 0.25);
        p.step(1, 2, 0.75);
        p.end_epoch(1, 2);
    }
    const std::string text = out.str();
    EXPECT_NE(text.find("epoch 1/1 [========================] 2/2 steps"), std::string::npos) << text;
    EXPECT_NE(text.find("loss 0.5\n"), std::string::npos) << text;
    EXPECT_EQ(text.find('\n'), text.size() - 1) << "one line, ended once (not again on destruction): " << text;
}

TEST(Progress, AnEpochCutShortKeepsItsLine) {
    std::ostringstream out;
    {
        fx::Progress p({.epochs = 1, .steps = 10, .out = &out, .terminal = true});
        p.step(1, 1, 1.0);
        wait_for_redraw();
        p.step(1, 2, 1.0);  // then, say, an exception leaves the loop
    }
    const std::string text = out.str();
    ASSERT_FALSE(text.empty());
    EXPECT_EQ(text.back(), '\n') << "whatever is printed next starts on a new line: " << text;
}

TEST(Progress, TerminalOnlyPrintsNothingElsewhere) {
    std::ostringstream out;
    fx::Progress p({.epochs = 1, .steps = 2, .unit = "images", .out = &out, .terminal_only = true});
    EXPECT_FALSE(p.redraws()) << "a stream given as `out` is not a terminal";
    p.step(1, 1, 1.0, 8);
    wait_for_redraw();
    p.step(1, 2, 1.0, 8);
    p.end_epoch(1, 2);
    p.clear();
    EXPECT_EQ(out.str(), "");
}

TEST(Progress, PlainLinesOutsideATerminal) {
    std::ostringstream out;
    fx::Progress p({.epochs = 2, .steps = 3, .out = &out});
    for (std::size_t s = 1; s <= 3; ++s) p.step(1, s, 2.0);
    p.end_epoch(1, 3);
    const std::string text = out.str();
    EXPECT_NE(text.find("epoch 1/2 3/3 steps"), std::string::npos) << text;
    EXPECT_NE(text.find("loss 2\n"), std::string::npos) << text;
    EXPECT_EQ(text.find('\r'), std::string::npos) << text;
    EXPECT_EQ(text.find('['), std::string::npos) << "no bar outside a terminal: " << text;
}

}  // namespace
