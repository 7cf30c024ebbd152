// test_io_checkpoint.cpp — a run stopped after a checkpoint and resumed from it ends bit for bit
// where an unbroken run ends; a checkpoint that does not fit changes nothing; a save that fails
// midway leaves the previous checkpoint loadable.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "test_io_support.hpp"

namespace {

using io_test::message_of;
using io_test::ScratchDir;

auto make_model() { return fx::Chain(fx::Dense(4, 8, fx::relu), fx::Dense(8, 3)); }
using Model = decltype(make_model());

struct Data {
    fx::Tensor x, y;
};

Data data() {
    fx::seed(7);
    return {fx::randn({16, 4}), fx::randn({16, 3})};
}

template <class Rule> void train(Model& model, fx::OptimiserState<Rule>& opt, const Data& d, int steps) {
    for (int i = 0; i < steps; ++i) {
        auto [loss, grads] = fx::withgradient(
            [&](const Model& m) { return fx::mean(fx::square(m(d.x) - d.y)); }, model);
        fx::update(opt, model, grads);
    }
}

std::vector<float> values(const fx::Tensor& t) { return t.to_vector<float>(); }

template <class Rule> void expect_same_run(const Model& a, const fx::OptimiserState<Rule>& oa, const Model& b,
                                           const fx::OptimiserState<Rule>& ob) {
    const auto sa = fx::state(a), sb = fx::state(b);
    ASSERT_EQ(sa.size(), sb.size());
    for (std::size_t i = 0; i < sa.size(); ++i) EXPECT_EQ(values(sa[i].second), values(sb[i].second)) << sa[i].first;
    ASSERT_EQ(oa.params.size(), ob.params.size());
    for (std::size_t i = 0; i < oa.params.size(); ++i) {
        SCOPED_TRACE(oa.params[i].path);
        EXPECT_EQ(oa.params[i].t, ob.params[i].t);
        EXPECT_EQ(oa.params[i].frozen, ob.params[i].frozen);
        ASSERT_EQ(oa.params[i].state1.defined(), ob.params[i].state1.defined());
        ASSERT_EQ(oa.params[i].state2.defined(), ob.params[i].state2.defined());
        if (oa.params[i].state1.defined()) {
            EXPECT_EQ(values(oa.params[i].state1), values(ob.params[i].state1));
        }
        if (oa.params[i].state2.defined()) {
            EXPECT_EQ(values(oa.params[i].state2), values(ob.params[i].state2));
        }
        ASSERT_EQ(oa.params[i].state3.defined(), ob.params[i].state3.defined());
        if (oa.params[i].state3.defined()) {
            EXPECT_EQ(values(oa.params[i].state3), values(ob.params[i].state3));
        }
        ASSERT_EQ(oa.params[i].accumulated.defined(), ob.params[i].accumulated.defined());
        if (oa.params[i].accumulated.defined()) {
            EXPECT_EQ(values(oa.params[i].accumulated), values(ob.params[i].accumulated));
            EXPECT_EQ(oa.params[i].accumulated_steps, ob.params[i].accumulated_steps);
        }
    }
    EXPECT_EQ(fx::detail::final_rule(oa.rule).eta, fx::detail::final_rule(ob.rule).eta);
}

TEST(IOCheckpoint, ResumedRunMatchesAnUnbrokenRun) {
    ScratchDir dir;
    const Data d = data();
    fx::seed(1);
    Model unbroken = make_model();
    Model first_half = fx::fmap([](const fx::Tensor& t) { return t.clone(); }, unbroken);
    auto opt_unbroken = fx::setup(fx::Adam{.eta = 0.01}, unbroken);
    train(unbroken, opt_unbroken, d, 10);

    {
        auto opt = fx::setup(fx::Adam{.eta = 0.01}, first_half);
        train(first_half, opt, d, 5);
        fx::save_checkpoint(dir / "run.safetensors", first_half, opt, {{"epoch", "5"}});
    }  // the first process ends here

    fx::seed(99);
    Model resumed = make_model();  // other initial values, overwritten by the checkpoint
    auto opt = fx::setup(fx::Adam{.eta = 0.01}, resumed);
    const auto extra = fx::load_checkpoint(dir / "run.safetensors", resumed, opt);
    EXPECT_EQ(extra, (std::map<std::string, std::string>{{"epoch", "5"}}));
    EXPECT_EQ(opt.params[0].t, 5);
    train(resumed, opt, d, 5);
    expect_same_run(resumed, opt, unbroken, opt_unbroken);
}

// Every rule's state (one or two tensors, Rprop's step sizes starting at η) and step count come
// back: ten steps in two halves with a checkpoint between end where ten unbroken steps end.
TEST(IOCheckpoint, EveryRulesRunResumesExactly) {
    const auto check = [](const auto& rule, const char* name) {
        SCOPED_TRACE(name);
        ScratchDir dir;
        const Data d = data();
        fx::seed(1);
        Model unbroken = make_model();
        Model first_half = fx::fmap([](const fx::Tensor& t) { return t.clone(); }, unbroken);
        auto opt_unbroken = fx::setup(rule, unbroken);
        train(unbroken, opt_unbroken, d, 10);
        {
            auto opt = fx::setup(rule, first_half);
            train(first_half, opt, d, 5);
            fx::save_checkpoint(dir / "run.safetensors", first_half, opt);
        }
        fx::seed(99);
        Model resumed = make_model();
        auto opt = fx::setup(rule, resumed);
        fx::load_checkpoint(dir / "run.safetensors", resumed, opt);
        train(resumed, opt, d, 5);
        expect_same_run(resumed, opt, unbroken, opt_unbroken);
    };
    check(fx::AMSGrad{.eta = 0.01}, "AMSGrad");
    check(fx::OAdam{.eta = 0.01}, "OAdam");
    check(fx::AdaGrad{}, "AdaGrad");
    check(fx::AdaDelta{}, "AdaDelta");
    check(fx::AdaMax{.eta = 0.01}, "AdaMax");
    check(fx::NAdam{.eta = 0.01}, "NAdam");
    check(fx::RAdam{.eta = 0.01}, "RAdam");  // rectified from step 6: the resumed half
    check(fx::AdaBelief{.eta = 0.01}, "AdaBelief");
    check(fx::Lion{.eta = 0.01}, "Lion");
    check(fx::Rprop{.eta = 0.01}, "Rprop");
    check(fx::OptimiserChain(fx::SignDecay{}, fx::Momentum{}), "SignDecay, Momentum");
    check(fx::OptimiserChain(fx::AccumGrad{3}, fx::Adam{.eta = 0.01}), "AccumGrad, Adam");  // saved halfway: 5 of 3 + 3
}

TEST(IOCheckpoint, LearningRateAndFrozenFlagsAreRestored) {
    ScratchDir dir;
    Model model = make_model();
    auto opt = fx::setup(fx::Adam{.eta = 0.01}, model);
    train(model, opt, data(), 2);
    fx::adjust(opt, 1.0 / 3.0);
    fx::freeze(opt, "layers.0");
    fx::save_checkpoint(dir / "run.safetensors", model, opt);

    Model other = make_model();
    auto restored = fx::setup(fx::Adam{.eta = 0.01}, other);
    fx::load_checkpoint(dir / "run.safetensors", other, restored);
    EXPECT_EQ(restored.rule.eta, 1.0 / 3.0);
    expect_same_run(other, restored, model, opt);
    EXPECT_TRUE(restored.params[0].frozen);
    EXPECT_FALSE(restored.params[2].frozen);
}

TEST(IOCheckpoint, TheFileIsReadableSafetensors) {
    ScratchDir dir;
    Model model = make_model();
    auto opt = fx::setup(fx::Adam{}, model);
    train(model, opt, data(), 1);
    fx::save_checkpoint(dir / "run.safetensors", model, opt, {{"epoch", "1"}});
    const auto state = fx::load_state(dir / "run.safetensors");
    EXPECT_EQ(values(state.at("model.layers.0.weight")), values(std::get<0>(model.layers).weight));
    EXPECT_EQ(values(state.at("optimiser.layers.1.bias.state2")), values(opt.params[3].state2));
    EXPECT_EQ(state.at("optimiser.layers.1.bias.step").dtype(), fx::DType::i64);
    EXPECT_EQ(state.at("optimiser.layers.1.bias.step").item(), 1.0);
    EXPECT_EQ(state.at("optimiser.layers.1.bias.frozen").dtype(), fx::DType::boolean);
    EXPECT_EQ(fx::load_metadata(dir / "run.safetensors").at("extra.epoch"), "1");
}

TEST(IOCheckpoint, AMismatchChangesNeitherModelNorOptimiser) {
    ScratchDir dir;
    Model model = make_model();
    auto opt = fx::setup(fx::Adam{}, model);
    train(model, opt, data(), 3);
    fx::save_checkpoint(dir / "run.safetensors", model, opt);

    auto wider = fx::Chain(fx::Dense(4, 9, fx::relu), fx::Dense(9, 3));
    auto wider_opt = fx::setup(fx::Adam{}, wider);
    const auto before = values(std::get<1>(wider.layers).bias);
    const std::string m = message_of([&] { fx::load_checkpoint(dir / "run.safetensors", wider, wider_opt); });
    EXPECT_NE(m.find("does not match the model and optimiser, nothing was loaded"), std::string::npos) << m;
    EXPECT_NE(m.find("model.layers.0.weight: shape {8, 4} in the file, {9, 4}"), std::string::npos) << m;
    EXPECT_NE(m.find("optimiser.layers.0.weight.state1: shape {8, 4}"), std::string::npos) << m;
    EXPECT_EQ(values(std::get<1>(wider.layers).bias), before);  // its shape matched, yet nothing was copied
    EXPECT_EQ(wider_opt.params[3].t, 0);

    // An optimiser with another rule keeps other state: Descent has no moments to restore into.
    Model same = make_model();
    auto descent = fx::setup(fx::Descent{}, same);
    const std::string d = message_of([&] { fx::load_checkpoint(dir / "run.safetensors", same, descent); });
    EXPECT_NE(d.find("not in the model and optimiser: optimiser.layers.0.weight.state1"), std::string::npos) << d;
    EXPECT_EQ(descent.params[0].t, 0);
}

// Overwrites the first bytes of tensor `name` in a safetensors file with `bytes`.
void patch_tensor(const std::filesystem::path& path, const std::string& name, const std::string& bytes) {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    std::uint64_t header_size = 0;
    f.read(reinterpret_cast<char*>(&header_size), 8);
    std::string header(header_size, ' ');
    f.read(header.data(), std::streamsize(header_size));
    const auto begin = nlohmann::json::parse(header).at(name).at("data_offsets").at(0).get<std::uint64_t>();
    f.seekp(std::streamoff(8 + header_size + begin));
    f.write(bytes.data(), std::streamsize(bytes.size()));
}

// Values no save writes, refused with the tensor named and the model and optimiser untouched: a
// BOOL byte other than 0 and 1 (undefined behaviour once read as a bool), a negative step count,
// a learning rate that is not a finite number.
TEST(IOCheckpoint, DamagedValuesAreRefusedAndChangeNothing) {
    ScratchDir dir;
    Model model = make_model();
    auto opt = fx::setup(fx::Adam{}, model);
    train(model, opt, data(), 2);
    const auto file = dir / "run.safetensors";
    Model other = make_model();
    auto other_opt = fx::setup(fx::Adam{}, other);
    const auto before = values(std::get<0>(other.layers).weight);
    auto expect_refused = [&](const std::string& what) {
        const std::string m = message_of([&] { fx::load_checkpoint(file, other, other_opt); });
        EXPECT_NE(m.find(what), std::string::npos) << m;
        EXPECT_EQ(values(std::get<0>(other.layers).weight), before) << what;
        EXPECT_EQ(other_opt.params[0].t, 0) << what;
        EXPECT_FALSE(other_opt.params[0].frozen) << what;
    };

    fx::save_checkpoint(file, model, opt);
    patch_tensor(file, "optimiser.layers.0.bias.frozen", std::string(1, '\x02'));
    expect_refused("optimiser.layers.0.bias.frozen is BOOL but its element 0 is the byte 2");

    fx::save_checkpoint(file, model, opt);
    const std::int64_t negative = -5;
    patch_tensor(file, "optimiser.layers.1.weight.step", std::string(reinterpret_cast<const char*>(&negative), 8));
    expect_refused("optimiser.layers.1.weight.step is -5, a negative step count");
    fx::save_checkpoint(file, model, opt);  // the boundary: -1 too (a mutant allowing it survived -5)
    const std::int64_t minus_one = -1;
    patch_tensor(file, "optimiser.layers.1.weight.step", std::string(reinterpret_cast<const char*>(&minus_one), 8));
    expect_refused("optimiser.layers.1.weight.step is -1, a negative step count");

    fx::save_checkpoint(file, model, opt);
    fx::load_checkpoint(file, other, other_opt);  // the same file, undamaged, loads
    // The learning rate is metadata: patched in the header's text, "nan" in place of its digits.
    std::string bytes;
    {
        std::ifstream in(file, std::ios::binary);
        bytes.assign(std::istreambuf_iterator<char>(in), {});
    }
    const auto at = bytes.find("\"fluxion.optimiser.eta\":\"");
    ASSERT_NE(at, std::string::npos);
    const auto value = at + std::string("\"fluxion.optimiser.eta\":\"").size();
    const auto end = bytes.find('"', value);
    // Exactly "nan", the closing quote moved and JSON's whitespace after it: text after the number
    // would be refused as such, and a check of finiteness dropped would go unseen.
    bytes.replace(value, end - value + 1, std::string(end - value + 1, ' ').replace(0, 4, "nan\""));
    std::ofstream(file, std::ios::binary | std::ios::trunc) << bytes;
    Model third = make_model();
    auto third_opt = fx::setup(fx::Adam{}, third);
    const std::string m = message_of([&] { fx::load_checkpoint(file, third, third_opt); });
    EXPECT_NE(m.find("\"fluxion.optimiser.eta\" is \"nan\", not a finite number"), std::string::npos) << m;
}

TEST(IOCheckpoint, APlainModelFileIsNotACheckpoint) {
    ScratchDir dir;
    Model model = make_model();
    fx::save(dir / "model.safetensors", model);
    auto opt = fx::setup(fx::Adam{}, model);
    const std::string m = message_of([&] { fx::load_checkpoint(dir / "model.safetensors", model, opt); });
    EXPECT_NE(m.find("not a fluxion checkpoint"), std::string::npos) << m;
    EXPECT_NE(m.find("fx::load"), std::string::npos) << m;
}

// The crash case: the next checkpoint fails midway (here the kernel refuses to let the file grow).
TEST(IOCheckpoint, AFailedSaveLeavesThePreviousCheckpointLoadable) {
    ScratchDir dir;
    const Data d = data();
    Model model = make_model();
    auto opt = fx::setup(fx::Adam{}, model);
    train(model, opt, d, 2);
    fx::save_checkpoint(dir / "run.safetensors", model, opt);
    const Model at_step_2 = fx::fmap([](const fx::Tensor& t) { return t.clone(); }, model);

    train(model, opt, d, 1);
    {
        io_test::FileSizeLimit limit(512);
        EXPECT_THROW(fx::save_checkpoint(dir / "run.safetensors", model, opt), fx::IOError);
    }

    EXPECT_EQ(dir.entries(), std::vector<std::string>{"run.safetensors"});
    Model resumed = make_model();
    auto resumed_opt = fx::setup(fx::Adam{}, resumed);
    fx::load_checkpoint(dir / "run.safetensors", resumed, resumed_opt);
    EXPECT_EQ(resumed_opt.params[0].t, 2);
    EXPECT_EQ(values(std::get<1>(resumed.layers).weight), values(std::get<1>(at_step_2.layers).weight));
}

}  // namespace
