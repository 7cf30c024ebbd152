// checkpoint.cpp — a model and its optimiser state as one safetensors file, so that a resumed run
// continues exactly where the saved one stopped. Written atomically like every save.
#include <set>

#include "core/io/checkpoint_format.hpp"
#include "core/io/state_reader.hpp"

namespace fluxion::detail {
namespace {

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
    write_state(path, all, checkpoint_metadata(eta, extra), "save_checkpoint");
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

    const std::string where = "load_checkpoint(\"" + path.string() + "\"): ";
    CheckpointMetadata metadata;
    auto check_metadata = [&](const std::map<std::string, std::string>& m) { metadata = read_checkpoint_metadata(m, where); };
    const ReadTarget checkpoint{"load_checkpoint", "model and optimiser",
                                "Set up the optimiser with the rule the run was saved with, for the model that was saved "
                                "(fx::setup(rule, model)), then load the checkpoint."};
    std::set<std::string> step_slots;  // the counts, which must not be negative
    for (const auto& p : params) {
        step_slots.insert(slot(p, "step"));
        if (p.accumulated.defined()) step_slots.insert(slot(p, "accumulated_steps"));
    }
    auto check_values = [&](const std::string& name, std::span<const std::byte> bytes) {
        if (step_slots.count(name)) (void)read_step_count(bytes, name, where);
    };
    read_into(path, all, {.strict = true}, checkpoint, check_metadata, check_values);

    for (std::size_t i = 0; i < params.size(); ++i) {
        params[i].t = *scalars.steps[i].data<std::int64_t>();
        params[i].frozen = *scalars.frozen[i].data<bool>();
        if (params[i].accumulated.defined())
            params[i].accumulated_steps = *scalars.accumulated_steps[i].data<std::int64_t>();
    }
    eta = metadata.eta;
    return metadata.extra;
}

}  // namespace fluxion::detail
