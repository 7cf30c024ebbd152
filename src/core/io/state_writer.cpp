// state_writer.cpp — writing name => tensor lists as safetensors: the header first (all sizes are
// known from shapes), then one host copy at a time, so a model on a GPU is never copied whole.
#include "core/io/atomic_file.hpp"
#include "core/io/safetensors_format.hpp"
#include "fluxion/io.hpp"

namespace fluxion {
namespace detail {

void write_state(const std::filesystem::path& path, const State& state, std::map<std::string, std::string> metadata,
                 const char* operation) {
    std::vector<TensorRecord> records;
    records.reserve(state.size());
    std::uint64_t offset = 0;
    for (const auto& [name, t] : state) {
        if (!t.defined())
            throw ValueError(std::string(operation) + "(\"" + path.string() + "\"): tensor \"" + name +
                             "\" is undefined; give it a value or leave it out");
        const auto bytes = static_cast<std::uint64_t>(t.numel()) * itemsize(t.dtype());
        records.push_back({name, t.dtype(), t.shape(), offset, offset + bytes});
        offset += bytes;
    }
    metadata["format"] = "pt";
    metadata["fluxion_version"] = FLUXION_VERSION;
    const std::string header = encode_safetensors_header(records, metadata);

    AtomicFile file(path, operation);
    file.write(header.data(), header.size());
    for (std::size_t i = 0; i < state.size(); ++i) {
        const Tensor host = state[i].second.detach().to(Device{}).contiguous();
        file.write(host.data_ptr(), records[i].end - records[i].begin);
    }
    file.commit();
}

}  // namespace detail

void save_state(const std::filesystem::path& path, const std::map<std::string, Tensor>& state,
                const std::map<std::string, std::string>& metadata) {
    detail::write_state(path, State(state.begin(), state.end()), metadata, "save_state");
}

void save_state(const std::filesystem::path& path, const State& state,
                const std::map<std::string, std::string>& metadata) {
    detail::write_state(path, state, metadata, "save_state");
}

}  // namespace fluxion
