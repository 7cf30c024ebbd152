// checkpoint.cpp — a model and its optimiser state as one safetensors file, so that a resumed run
// continues exactly where the saved one stopped. Written atomically like every save.
#include <charconv>
#include <cmath>
#include <cstring>
#include <cstdio>

#include "core/io/state_reader.hpp"

namespace fluxion::detail {
namespace {

constexpr const char* kMarker = "fluxion.checkpoint";  // metadata: the file layout's version
constexpr const char* kEta = "fluxion.optimiser.eta";  // metadata: the learning rate in effect
constexpr const char* kExtra = "extra.";               // metadata: the caller's entries, prefixed

std::string slot(const ParamState& p, const char* field) { return "optimiser." + p.path + "." + field; }

// The optimiser's CPU scalars of each trainable tensor, for writing or to be read into.
struct Scalars {
    std::vector<Tensor> steps, frozen, accumulated_steps;
};

// The optimiser's tensors under their checkpoint names.
void add_optimiser(State& out, const std::vector<ParamState>& params, const Scalars& scalars) {
    for (std::size_t i = 0; i < params.size(); ++i) {
        if (params[i].state1.defined()) out.emplace_back(slot(params[i], "state1"), params[i].state1);
        if (params[i].state2.defined()) out.emplace_back(slot(params[i], "state2"), params[i].state2);
        if (params[i].state3.defined()) out.emplace_back(slot(params[i], "state3"), params[i].state3);
        out.emplace_back(slot(params[i], "step"), scalars.steps[i]);
        out.emplace_back(slot(params[i], "frozen"), scalars.frozen[i]);
        if (params[i].accumulated.defined()) {
            out.emplace_back(slot(params[i], "accumulated"), params[i].accumulated);
            out.emplace_back(slot(params[i], "accumulated_steps"), scalars.accumulated_steps[i]);
        }
    }
}

State with_prefix(const State& model) {
    State out;
    for (const auto& [name, t] : model) out.emplace_back("model." + name, t);
    return out;
}

std::string exact_text(double x) {
    char buffer[32];
    std::snprintf(buffer, sizeof buffer, "%.17g", x);  // enough digits to read back the same double
    return buffer;
}

}  // namespace

void write_checkpoint(const std::filesystem::path& path, const State& model, const std::vector<ParamState>& params,
                      double eta, const std::map<std::string, std::string>& extra) {
    Scalars scalars;
    for (const auto& p : params) {
        scalars.steps.push_back(tensor(std::vector<std::int64_t>{p.t}, Shape{}));
        scalars.frozen.push_back(tensor(std::vector<bool>{p.frozen}, Shape{}));
        scalars.accumulated_steps.push_back(tensor(std::vector<std::int64_t>{p.accumulated_steps}, Shape{}));
    }
    State all = with_prefix(model);
    add_optimiser(all, params, scalars);
    std::map<std::string, std::string> metadata{{kMarker, "1"}, {kEta, exact_text(eta)}};
    for (const auto& [key, value] : extra) metadata[kExtra + key] = value;
    write_state(path, all, std::move(metadata), "save_checkpoint");
}

std::map<std::string, std::string> read_checkpoint(const std::filesystem::path& path, const State& model,
                                                   std::vector<ParamState>& params, double& eta) {
    Scalars scalars;
    for (std::size_t i = 0; i < params.size(); ++i) {
        scalars.steps.push_back(empty({}, {.dtype = DType::i64}));
        scalars.frozen.push_back(empty({}, {.dtype = DType::boolean}));
        scalars.accumulated_steps.push_back(empty({}, {.dtype = DType::i64}));
    }
    State all = with_prefix(model);
    add_optimiser(all, params, scalars);

    double saved_eta = 0;
    std::map<std::string, std::string> extra;
    auto check_metadata = [&](const std::map<std::string, std::string>& metadata) {
        const std::string where = "load_checkpoint(\"" + path.string() + "\"): ";
        auto eta_text = metadata.find(kEta);
        if (!metadata.count(kMarker) || eta_text == metadata.end())
            throw IOError(where + "this is not a fluxion checkpoint (no \"" + kMarker +
                          "\" metadata); a model saved with fx::save loads with fx::load");
        const std::string& text = eta_text->second;
        const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), saved_eta);
        if (error != std::errc() || end != text.data() + text.size() || !std::isfinite(saved_eta))
            throw IOError(where + "the metadata \"" + kEta + "\" is \"" + text + "\", not a finite number");
        const std::string prefix = kExtra;
        for (const auto& [key, value] : metadata)
            if (key.compare(0, prefix.size(), prefix) == 0) extra.emplace(key.substr(prefix.size()), value);
    };
    const ReadTarget checkpoint{"load_checkpoint", "model and optimiser",
                                "Set up the optimiser with the rule the run was saved with, for the model that was saved "
                                "(fx::setup(rule, model)), then load the checkpoint."};
    std::map<std::string, std::size_t> step_slots;  // the counts, which must not be negative
    for (std::size_t i = 0; i < params.size(); ++i) {
        step_slots.emplace(slot(params[i], "step"), i);
        if (params[i].accumulated.defined()) step_slots.emplace(slot(params[i], "accumulated_steps"), i);
    }
    auto check_values = [&](const std::string& name, std::span<const std::byte> bytes) {
        if (!step_slots.count(name) || bytes.size() != sizeof(std::int64_t)) return;
        std::int64_t t = 0;
        std::memcpy(&t, bytes.data(), sizeof t);
        if (t < 0)
            throw IOError("load_checkpoint(\"" + path.string() + "\"): " + name + " is " + std::to_string(t) +
                          ", a negative step count; the file is damaged. Nothing was loaded.");
    };
    read_into(path, all, {.strict = true}, checkpoint, check_metadata, check_values);

    for (std::size_t i = 0; i < params.size(); ++i) {
        params[i].t = *scalars.steps[i].data<std::int64_t>();
        params[i].frozen = *scalars.frozen[i].data<bool>();
        if (params[i].accumulated.defined())
            params[i].accumulated_steps = *scalars.accumulated_steps[i].data<std::int64_t>();
    }
    eta = saved_eta;
    return extra;
}

}  // namespace fluxion::detail
