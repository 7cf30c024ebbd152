// test_functor.cpp — user-defined models through FLUXION_FUNCTOR / FLUXION_TRAINABLE (the seed
// pages' ActorCritic): which fields fmap, gpu, state, gradients and optimisers reach, and that an
// undeclared type is refused when compiling, never ignored at run time.
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include <unistd.h>

#include "fluxion/autodiff.hpp"
#include "fluxion/layers.hpp"
#include "fluxion/optimisers.hpp"
#include "fluxion/state.hpp"

namespace fx = fluxion;
using fx::Tensor;

// Both fields declared: everything reaches both.
struct ActorCritic {
    Tensor actor;
    Tensor critic;
};
FLUXION_FUNCTOR(ActorCritic, actor, critic);

// Only `actor` declared (Flux's `@functor ActorCritic (actor,)`): critic is left alone.
namespace only_actor {
struct ActorCritic {
    Tensor actor;
    Tensor critic;
};
}  // namespace only_actor
FLUXION_FUNCTOR(only_actor::ActorCritic, actor);

// Both declared, only `actor` trainable: fmap and state see both, optimisers only actor.
namespace train_actor {
struct ActorCritic {
    Tensor actor;
    Tensor critic;
};
}  // namespace train_actor
FLUXION_FUNCTOR(train_actor::ActorCritic, actor, critic);
FLUXION_TRAINABLE(train_actor::ActorCritic, actor);

// The same idea with layers for fields: a small reinforcement-learning model.
struct Agent {
    fx::Chain<fx::Dense, fx::Dense, fx::Activation> actor;
    fx::Dense critic;
    Tensor operator()(const Tensor& x) const { return actor(x); }
};
FLUXION_FUNCTOR(Agent, actor, critic);

namespace {

const fx::Device host0{"TestHost", 0};  // the test plugin, standing in for a GPU

TEST(Functor, BothDeclaredFieldsMoveAndAreMapped) {
    ActorCritic m{fx::ones({2, 2}), fx::ones({2})};
    auto moved = fx::fmap(fx::ToDevice{host0}, m);
    EXPECT_EQ(moved.actor.device(), host0);
    EXPECT_EQ(moved.critic.device(), host0);
    auto back = moved | fx::cpu;
    EXPECT_TRUE(back.critic.device().is_cpu());
    auto doubled = fx::fmap([](const Tensor& t) { return t * 2.0; }, m);
    EXPECT_EQ(doubled.actor.to_vector<float>(), std::vector<float>(4, 2.0f));
    EXPECT_EQ(doubled.critic.to_vector<float>(), std::vector<float>(2, 2.0f));
    auto st = fx::state(m);
    ASSERT_EQ(st.size(), 2u);
    EXPECT_EQ(st[0].first, "actor");
    EXPECT_EQ(st[1].first, "critic");
}

TEST(Functor, OnlyTheListedFieldIsMapped) {
    only_actor::ActorCritic m{fx::ones({2, 2}), fx::ones({2})};
    auto moved = m | host0;
    EXPECT_EQ(moved.actor.device(), host0);
    EXPECT_TRUE(moved.critic.device().is_cpu());
    EXPECT_TRUE(moved.critic.is_same(m.critic));  // untouched: the very same handle
    EXPECT_EQ(fx::state(m).size(), 1u);
}

TEST(Functor, TrainableLimitsTheOptimiserButNotFmap) {
    train_actor::ActorCritic m{fx::ones({2, 2}), fx::ones({2})};
    auto moved = m | host0;
    EXPECT_EQ(moved.critic.device(), host0);
    EXPECT_EQ(fx::state(m).size(), 2u);

    auto opt = fx::setup(fx::Descent{.eta = 0.5}, m);
    ASSERT_EQ(opt.params.size(), 1u);
    EXPECT_EQ(opt.params[0].path, "actor");
    auto [loss, grads] = fx::withgradient([](const auto& ac) { return fx::sum(ac.actor) + fx::sum(ac.critic); }, m);
    EXPECT_EQ(grads.critic.to_vector<float>(), std::vector<float>(2, 1.0f));  // gradients still reach every field
    fx::update(opt, m, grads);
    EXPECT_EQ(m.actor.to_vector<float>(), std::vector<float>(4, 0.5f));
    EXPECT_EQ(m.critic.to_vector<float>(), std::vector<float>(2, 1.0f));
}

TEST(Functor, GradientHasTheStructsType) {
    ActorCritic m{fx::tensor({1, 2, 3, 4}, {2, 2}), fx::tensor({5, 6})};
    auto [g] = fx::gradient([](const ActorCritic& ac) { return fx::sum(fx::square(ac.actor)) + fx::sum(ac.critic); }, m);
    static_assert(std::is_same_v<decltype(g), ActorCritic>);
    EXPECT_EQ(g.actor.to_vector<float>(), (std::vector<float>{2, 4, 6, 8}));
    EXPECT_EQ(g.critic.to_vector<float>(), (std::vector<float>{1, 1}));
}

TEST(Functor, TheActorCriticExampleTrainsOnAnyDevice) {
    fx::seed(4);
    Agent agent{fx::Chain(fx::Dense(4, 8, fx::relu), fx::Dense(8, 2), fx::softmax), fx::Dense(4, 1)};
    agent = agent | host0;
    EXPECT_EQ(agent.critic.weight.device(), host0);
    auto st = fx::state(agent);
    EXPECT_EQ(st.front().first, "actor.layers.0.weight");
    EXPECT_EQ(st.back().first, "critic.bias");

    Tensor obs = fx::rand({16, 4}) | host0, returns = fx::rand({16, 1}) | host0;
    Tensor chosen = fx::onehot(fx::tensor(std::vector<std::int64_t>(16, 1)), 2) | host0;
    auto lossfn = [&](const Agent& a) {
        Tensor value_loss = fx::mean(fx::square(a.critic(obs) - returns));
        Tensor policy_loss = -fx::mean(fx::sum(fx::log(a(obs)) * chosen, 1));
        return value_loss + policy_loss;
    };
    auto opt = fx::setup(fx::Adam{.eta = 0.02}, agent);
    double first = lossfn(agent).item(), last = first;
    for (int i = 0; i < 50; ++i) {
        auto [loss, grads] = fx::withgradient(lossfn, agent);
        fx::update(opt, agent, grads);
        last = loss.item();
    }
    EXPECT_LT(last, first / 2);
    EXPECT_GT((agent(fx::rand({1, 4}) | host0) | fx::cpu).to_vector<float>()[1], 0.9f);
}

// ---- an undeclared type does not compile ----

int compile(const std::string& source, std::string& output) {
    auto dir = std::filesystem::temp_directory_path() / ("fluxion_functor_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
    auto file = dir / "probe.cpp";
    std::ofstream(file) << source;
    std::string cmd = "c++ -std=c++20 -fsyntax-only -I" FLUXION_SOURCE_DIR "/include " + file.string() + " 2>&1";
    FILE* pipe = popen(cmd.c_str(), "r");
    if (!pipe) return -1;
    std::array<char, 4096> buf{};
    while (std::fgets(buf.data(), buf.size(), pipe)) output += buf.data();
    int status = pclose(pipe);
    std::filesystem::remove_all(dir);
    return status;
}

std::string probe(bool declared) {
    return std::string("#include \"fluxion/functor.hpp\"\n"
                       "struct ActorCritic { fluxion::Tensor actor, critic; };\n") +
           (declared ? "FLUXION_FUNCTOR(ActorCritic, actor, critic);\n" : "") +
           "ActorCritic moved(const ActorCritic& m) { return fluxion::fmap(fluxion::cpu, m); }\n";
}

TEST(Functor, FmapOnAnUndeclaredTypeIsACompileErrorSayingWhatToDeclare) {
    if (std::system("c++ --version > /dev/null 2>&1") != 0) GTEST_SKIP() << "no C++ compiler (c++) on PATH";
    std::string ok_output, error_output;
    ASSERT_EQ(compile(probe(true), ok_output), 0) << "the declared probe must compile:\n" << ok_output;
    EXPECT_NE(compile(probe(false), error_output), 0) << "fmap on an undeclared type compiled";
    EXPECT_NE(error_output.find("FLUXION_FUNCTOR(YourType, field1, field2, ...)"), std::string::npos) << error_output;
}

}  // namespace

int main(int argc, char** argv) {
    setenv("FLUXION_PLUGIN_PATH", FLUXION_TEST_PLUGIN_DIR, 1);
    ::testing::InitGoogleTest(&argc, argv);
    return RUN_ALL_TESTS();
}
