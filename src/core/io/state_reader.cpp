// state_reader.cpp — reading safetensors into new CPU tensors or into an existing model's tensors.
// Files are mapped, not read: the header is checked against the mapping, then each tensor's bytes
// are copied once to where they belong.
#include <cstring>
#include <sstream>

#include "core/io/state_reader.hpp"

#include "core/io/mapped_file.hpp"
#include "core/io/safetensors_format.hpp"

namespace fluxion {
namespace detail {
namespace {

const std::byte* data_of(std::span<const std::byte> file, const SafetensorsHeader& header, const TensorRecord& r) {
    return file.data() + header.data_start + r.begin;
}

Tensor host_tensor(std::span<const std::byte> file, const SafetensorsHeader& header, const TensorRecord& r) {
    Tensor t = empty(r.shape, {.dtype = r.dtype});
    if (r.end > r.begin) std::memcpy(t.data_ptr(), data_of(file, header, r), r.end - r.begin);
    return t;
}

std::map<std::string, Tensor> all_tensors(std::span<const std::byte> file, const std::string& source) {
    const SafetensorsHeader header = parse_safetensors(file, source);
    std::map<std::string, Tensor> out;
    for (const auto& r : header.tensors) out.emplace(r.name, host_tensor(file, header, r));
    return out;
}

void copy_into(Tensor& target, std::span<const std::byte> file, const SafetensorsHeader& header, const TensorRecord& r) {
    if (target.device().is_cpu() && target.is_contiguous()) {
        if (r.end > r.begin) std::memcpy(target.data_ptr(), data_of(file, header, r), r.end - r.begin);
    } else {
        target.copy_(host_tensor(file, header, r));
    }
}

std::string mismatch_text(const std::string& name, const TensorRecord& r, const Tensor& t, const std::string& target) {
    std::ostringstream m;
    m << name << ":";
    if (r.shape != t.shape()) m << " shape " << to_string(r.shape) << " in the file, " << to_string(t.shape()) << " in the " << target;
    if (r.shape != t.shape() && r.dtype != t.dtype()) m << ";";
    if (r.dtype != t.dtype()) m << " dtype " << fluxion::name(r.dtype) << " in the file, " << fluxion::name(t.dtype()) << " in the " << target;
    return m.str();
}

std::string strict_failure(const ReadTarget& what, const std::filesystem::path& path, const LoadReport& report,
                           const std::vector<std::string>& mismatch_details) {
    std::ostringstream m;
    m << what.operation << "(\"" << path.string() << "\"): the file does not match the " << what.target
      << ", nothing was loaded.";
    for (const auto& n : report.missing) m << "\n  missing from the file: " << n;
    for (const auto& n : report.unexpected) m << "\n  not in the " << what.target << ": " << n;
    for (const auto& d : mismatch_details) m << "\n  different " << d;
    m << "\n" << what.fix;
    return m.str();
}

// PyTorch's BatchNorm counts its batches in "<name>.num_batches_tracked"; fluxion's keeps no count
// (its momentum is fixed), so a state_dict's counter has nowhere to go and is no error.
bool batchnorm_counter(const std::string& name, const State& targets) {
    const std::string suffix = ".num_batches_tracked";
    if (name.size() <= suffix.size() || name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0)
        return false;
    const std::string mean = name.substr(0, name.size() - suffix.size()) + ".running_mean";
    for (const auto& [n, t] : targets)
        if (n == mean) return true;
    return false;
}

}  // namespace

LoadReport read_into(const std::filesystem::path& path, const State& targets, LoadOptions options,
                     const ReadTarget& what, const MetadataCheck& check_metadata, const ValueCheck& check_values) {
    const MappedFile file(path);
    const SafetensorsHeader header = parse_safetensors(file.bytes(), path.string());
    if (check_metadata) check_metadata(header.metadata);
    std::map<std::string, const TensorRecord*> in_file;
    for (const auto& r : header.tensors) in_file.emplace(r.name, &r);

    LoadReport report;
    std::vector<std::string> mismatch_details;
    std::vector<std::pair<Tensor, const TensorRecord*>> matches;
    for (const auto& [name, t] : targets) {
        auto it = in_file.find(name);
        if (it == in_file.end()) {
            report.missing.push_back(name);
            continue;
        }
        const TensorRecord* r = it->second;
        in_file.erase(it);
        if (r->shape != t.shape() || r->dtype != t.dtype()) {
            report.mismatched.push_back(name);
            mismatch_details.push_back(mismatch_text(name, *r, t, what.target));
        } else {
            matches.emplace_back(t, r);
        }
    }
    for (const auto& r : header.tensors)
        if (in_file.count(r.name) && !batchnorm_counter(r.name, targets)) report.unexpected.push_back(r.name);

    if (options.strict && !report.complete()) throw IOError(strict_failure(what, path, report, mismatch_details));
    for (const auto& [t, r] : matches) {
        const std::span<const std::byte> bytes(data_of(file.bytes(), header, *r), r->end - r->begin);
        if (r->dtype == DType::boolean)
            check_bool_bytes(bytes, r->name, std::string(what.operation) + "(\"" + path.string() + "\"): ");
        if (check_values) check_values(r->name, bytes);
    }
    for (auto& [t, r] : matches) copy_into(t, file.bytes(), header, *r);
    return report;
}

LoadReport read_state_into(const std::filesystem::path& path, const State& targets, LoadOptions options,
                           const char* operation) {
    const ReadTarget model{operation, "model",
                           "Load into the model that was saved, or pass {.strict = false} to load only the tensors that match."};
    return read_into(path, targets, options, model, {});
}

}  // namespace detail

std::map<std::string, Tensor> load_state(const std::filesystem::path& path) {
    const detail::MappedFile file(path);
    return detail::all_tensors(file.bytes(), path.string());
}

std::map<std::string, Tensor> load_state_from_memory(std::span<const std::byte> bytes, const std::string& source) {
    return detail::all_tensors(bytes, source);
}

std::map<std::string, std::string> load_metadata(const std::filesystem::path& path) {
    const detail::MappedFile file(path);
    return detail::parse_safetensors(file.bytes(), path.string()).metadata;
}

}  // namespace fluxion
