// fluxion/io.hpp — saving and loading tensors, models and training checkpoints as safetensors
// files, the format PyTorch and Hugging Face tools read. State names are the dotted paths of
// visit_tensors (`layers.0.weight`), as PyTorch's state_dict names them.
//
//   fx::save("model.safetensors", model);           // from any device; atomic replace
//   fx::load("model.safetensors", model);           // in place, on each tensor's own device
//   auto report = fx::load("other.safetensors", model, {.strict = false});   // what fits
//   fx::save_checkpoint("run.safetensors", model, opt, {{"epoch", "3"}});    // model + optimiser
//   auto extra = fx::load_checkpoint("run.safetensors", model, opt);         // resume exactly
//
// Writing is atomic: a failed or interrupted save leaves the previous file as it was. Reading
// trusts nothing in the file: every problem is an IOError naming the file and what is wrong.
#pragma once
#include <cstddef>
#include <filesystem>
#include <map>
#include <ostream>
#include <span>
#include <sstream>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "fluxion/optimisers.hpp"
#include "fluxion/state.hpp"
#include "fluxion/tensor.hpp"

namespace fluxion {

struct LoadOptions {
    // true: the file and the model must hold the same names, shapes and dtypes, else nothing is
    // loaded and one IOError lists every difference. false: load what fits and report the rest.
    // PyTorch's BatchNorm counter "<name>.num_batches_tracked" is skipped wherever the model has
    // "<name>.running_mean": fluxion's BatchNorm keeps no count, and PyTorch's state_dicts hold it.
    bool strict = true;
};

struct LoadReport {
    std::vector<std::string> missing;     // in the model, not in the file: left unchanged
    std::vector<std::string> unexpected;  // in the file, not in the model: ignored
    std::vector<std::string> mismatched;  // in both with another shape or dtype: left unchanged
    bool complete() const { return missing.empty() && unexpected.empty() && mismatched.empty(); }
};

// ---- plain name => tensor maps (fx::State, from state.hpp, is the ordered form) ----
// Tensors may live on any device and have any strides; they are written in the given order (the
// map's, or the vector's). `metadata` goes into the file's "__metadata__" with fluxion's own
// "format" and "fluxion_version" entries (which win over entries of those names). Names must be
// unique and not "__metadata__" (ValueError, and no file is touched).
void save_state(const std::filesystem::path& path, const std::map<std::string, Tensor>& state,
                const std::map<std::string, std::string>& metadata = {});
void save_state(const std::filesystem::path& path, const State& state,
                const std::map<std::string, std::string>& metadata = {});
// Every tensor of the file, on the CPU.
std::map<std::string, Tensor> load_state(const std::filesystem::path& path);
// The same from bytes already in memory; `source` names them in error messages.
std::map<std::string, Tensor> load_state_from_memory(std::span<const std::byte> bytes,
                                                     const std::string& source = "<memory>");
// The file's "__metadata__" (fluxion writes format, fluxion_version and, for models, summary).
std::map<std::string, std::string> load_metadata(const std::filesystem::path& path);

// ---- images ----
// A PNG file of an image tensor: {H, W} or {C, H, W} with C = 1 (grey), 2 (grey, alpha), 3 (RGB) or
// 4 (RGBA), PyTorch's layout, on any device; u8 as it is, floating types read as [0, 1] (clamped).
// Written atomically, as save is.
void save_png(const std::filesystem::path& path, const Tensor& image);

namespace detail {
void write_state(const std::filesystem::path& path, const State& state, std::map<std::string, std::string> metadata,
                 const char* operation);
// Copies the file's tensors into `targets` (handles on the model's storage) after checking them all.
LoadReport read_state_into(const std::filesystem::path& path, const State& targets, LoadOptions options,
                           const char* operation);

template <class T>
concept Printable = requires(std::ostream& os, const T& x) { os << x; };

template <class Model> std::map<std::string, std::string> model_metadata(const Model& model) {
    std::map<std::string, std::string> metadata;
    if constexpr (Printable<Model>) {
        std::ostringstream summary;
        summary << model;
        metadata["summary"] = summary.str();
    }
    return metadata;
}
}  // namespace detail

// ---- models: anything visit_tensors walks (layers, Chains, FLUXION_FUNCTOR types, containers) ----
// Writes every defined tensor of `model` (host copies of device tensors) under its dotted name;
// the metadata holds the model's printed summary when the type can be printed.
template <class Model> void save(const std::filesystem::path& path, const Model& model) {
    detail::write_state(path, state(model), detail::model_metadata(model), "save");
}

// Fills the tensors of an existing `model` in place (each keeps its device and storage).
// Everything is checked before anything is copied, so a failed strict load changes nothing.
template <class Model> LoadReport load(const std::filesystem::path& path, Model& model, LoadOptions options = {}) {
    static_assert(!std::is_const_v<Model>, "fluxion: load fills the model in place; pass a non-const model");
    return detail::read_state_into(path, state(model), options, "load");
}

// ---- training checkpoints: a model and its optimiser state in one file ----
// Tensors: "model.<name>" for the model's state; for each trainable path, "optimiser.<path>.state1"
// to ".state3" (the rule's moments, where it keeps them), ".step" (i64) and ".frozen" (bool), and
// with AccumGrad ".accumulated" and ".accumulated_steps" (i64).
// Metadata: the learning rate in effect (fx::adjust changes it) and `extra` (e.g. the epoch).
// The rule's other hyper-parameters come from the code that calls fx::setup, as with PyTorch.
// The random generator's state is not saved: reseed (fx::seed) for data order and dropout.
namespace detail {
void write_checkpoint(const std::filesystem::path& path, const State& model, const std::vector<ParamState>& params,
                      double eta, const std::map<std::string, std::string>& extra);
std::map<std::string, std::string> read_checkpoint(const std::filesystem::path& path, const State& model,
                                                   std::vector<ParamState>& params, double& eta);
}  // namespace detail

template <class Model, class Rule>
void save_checkpoint(const std::filesystem::path& path, const Model& model, const OptimiserState<Rule>& optimiser,
                     const std::map<std::string, std::string>& extra = {}) {
    detail::write_checkpoint(path, state(model), optimiser.params, detail::final_rule(optimiser.rule).eta, extra);
}

// Restores the model's tensors, the optimiser's moments, step counts, frozen flags and learning
// rate in place, and returns `extra`. `optimiser` must come from fx::setup with the rule used when
// saving. Everything is checked first: on any mismatch nothing changes and one IOError lists it all.
template <class Model, class Rule>
std::map<std::string, std::string> load_checkpoint(const std::filesystem::path& path, Model& model,
                                                   OptimiserState<Rule>& optimiser) {
    static_assert(!std::is_const_v<Model>, "fluxion: load_checkpoint fills the model in place; pass a non-const model");
    return detail::read_checkpoint(path, state(model), optimiser.params, detail::final_rule(optimiser.rule).eta);
}

}  // namespace fluxion
