// safetensors_format.cpp — parsing and checking safetensors headers, and encoding them.
// Every number in a header is untrusted: sizes are multiplied with overflow checks and every
// range is compared with the bytes actually present before anyone reads tensor data.
#include "core/io/safetensors_format.hpp"

#include <algorithm>
#include <bit>
#include <cstring>
#include <optional>
#include <vector>

#include <nlohmann/json.hpp>

#include "fluxion/error.hpp"

static_assert(std::endian::native == std::endian::little,
              "safetensors data is little-endian; fluxion's reader and writer copy bytes as they are");

namespace fluxion::detail {
namespace {

using json = nlohmann::json;

constexpr const char* kMetadataKey = "__metadata__";

struct DTypeName {
    DType dtype;
    const char* name;
};
constexpr DTypeName kDTypeNames[] = {
    {DType::f32, "F32"}, {DType::f64, "F64"}, {DType::i32, "I32"},      {DType::i64, "I64"},
    {DType::u8, "U8"},   {DType::boolean, "BOOL"}, {DType::f16, "F16"}, {DType::bf16, "BF16"},
};

// Built by appending: GCC 12 warns falsely (-Wrestrict) about `"literal" + std::string`.
std::string in_quotes(std::string_view s) {
    std::string out(1, '"');
    out.append(s);
    out += '"';
    return out;
}

[[noreturn]] void fail(std::string_view source, const std::string& problem) {
    throw IOError("reading " + in_quotes(source) + " as safetensors: " + problem);
}

std::string range_text(std::uint64_t begin, std::uint64_t end) {
    std::string out(1, '[');
    out.append(std::to_string(begin)).append(", ").append(std::to_string(end)) += ')';
    return out;
}

std::string shape_text(const std::vector<std::int64_t>& shape) {
    std::string s = "{";
    for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
    return s + "}";
}

std::optional<DType> dtype_from_format_name(const std::string& name) {
    for (const auto& d : kDTypeNames)
        if (name == d.name) return d.dtype;
    return std::nullopt;
}

std::string known_dtype_names() {
    std::string s;
    for (const auto& d : kDTypeNames) s += (s.empty() ? "" : ", ") + std::string(d.name);
    return s;
}

// A JSON number that is a whole number in [0, 2^64), or nothing.
std::optional<std::uint64_t> as_count(const json& v) {
    if (v.is_number_unsigned()) return v.get<std::uint64_t>();
    if (v.is_number_integer() && v.get<std::int64_t>() >= 0) return static_cast<std::uint64_t>(v.get<std::int64_t>());
    return std::nullopt;
}

std::uint64_t read_header_length(std::span<const std::byte> file, std::string_view source) {
    if (file.size() < 8)
        fail(source, "the file has " + std::to_string(file.size()) +
                         " bytes, fewer than the 8-byte header length that starts every safetensors file");
    std::uint64_t n = 0;
    std::memcpy(&n, file.data(), 8);
    if (n > kMaxHeaderBytes)
        fail(source, "the header length " + std::to_string(n) + " is larger than the format's limit of " +
                         std::to_string(kMaxHeaderBytes) + " bytes: the file is corrupt or not safetensors");
    if (n > file.size() - 8)
        fail(source, "the header length " + std::to_string(n) + " is larger than the " +
                         std::to_string(file.size() - 8) + " bytes that follow it: the file is truncated");
    return n;
}

// Builds the header's JSON value from parse events, refusing while it parses what no header
// holds: a repeated key, nesting deeper than three levels (names, their fields, shapes) plus slack,
// and long arrays. Hostile headers thus cost little more memory than their own size, and every
// step is O(log n) (nlohmann's callback parser rescans each object as it closes).
class HeaderBuilder final : public nlohmann::json_sax<json> {
public:
    static constexpr std::size_t kMaxDepth = 8, kMaxArray = 64;

    HeaderBuilder(json& root, std::string_view source) : root_(root), source_(source) {}

    bool null() override { return add(nullptr) != nullptr; }
    bool boolean(bool v) override { return add(v) != nullptr; }
    bool number_integer(number_integer_t v) override { return add(v) != nullptr; }
    bool number_unsigned(number_unsigned_t v) override { return add(v) != nullptr; }
    bool number_float(number_float_t v, const string_t&) override { return add(v) != nullptr; }
    bool string(string_t& v) override { return add(std::move(v)) != nullptr; }
    bool binary(binary_t&) override { fail(source_, "the header is not valid JSON (binary value)"); }
    bool start_object(std::size_t) override { return open(json::object()); }
    bool start_array(std::size_t) override { return open(json::array()); }
    bool end_object() override { return close(); }
    bool end_array() override { return close(); }
    bool key(string_t& k) override {
        if (stack_.back()->contains(k)) {
            fail(source_, stack_.size() == 1 ? "the header names " + in_quotes(k) + " twice"
                                             : "the header repeats the key " + in_quotes(k) + " in one object");
        }
        key_ = std::move(k);
        return true;
    }
    bool parse_error(std::size_t, const std::string&, const json::exception& e) override {
        fail(source_, std::string("the header is not valid JSON (") + e.what() + ")");
    }

private:
    // Places v in the innermost open object or array (or as the root) and returns where it lives.
    // Pointers stay valid while a value is open: nothing else is added to its parent meanwhile.
    json* add(json v) {
        if (stack_.empty()) return &(root_ = std::move(v));
        json& parent = *stack_.back();
        if (parent.is_object()) return &(parent[key_] = std::move(v));
        if (parent.size() == kMaxArray)
            fail(source_, "the header holds an array longer than " + std::to_string(kMaxArray) +
                              " elements (shapes have at most " + std::to_string(kMaxArray) + " dimensions)");
        parent.push_back(std::move(v));
        return &parent.back();
    }
    bool open(json v) {
        if (stack_.size() == kMaxDepth)
            fail(source_, "the header nests deeper than " + std::to_string(kMaxDepth) + " levels");
        stack_.push_back(add(std::move(v)));
        return true;
    }
    bool close() {
        stack_.pop_back();
        return true;
    }

    json& root_;
    std::string_view source_;
    std::vector<json*> stack_;
    std::string key_;
};

json parse_header_json(std::span<const std::byte> text, std::string_view source) {
    const auto* first = reinterpret_cast<const char*>(text.data());
    // nlohmann's lexer stops at a NUL as if the input ended; JSON text never holds one.
    if (const void* nul = std::memchr(first, '\0', text.size()))
        fail(source, "the header is not valid JSON (a NUL byte at offset " +
                         std::to_string(static_cast<const char*>(nul) - first + 8) + " of the file)");
    json header;
    HeaderBuilder builder(header, source);
    json::sax_parse(first, first + text.size(), &builder);
    if (!header.is_object()) fail(source, std::string("the header is a JSON ") + header.type_name() + ", expected an object");
    return header;
}

std::map<std::string, std::string> parse_metadata(const json& m, std::string_view source) {
    if (!m.is_object()) fail(source, "\"__metadata__\" must be an object of strings, found a " + std::string(m.type_name()));
    std::map<std::string, std::string> out;
    for (const auto& [key, value] : m.items()) {
        if (!value.is_string())
            fail(source, "\"__metadata__\" entry " + in_quotes(key) + " is a " + value.type_name() + ", expected a string");
        out.emplace(key, value.get<std::string>());
    }
    return out;
}

// Bytes taken by `shape` elements of `dtype`, or nothing if that overflows 64 bits.
std::optional<std::uint64_t> byte_size(const std::vector<std::int64_t>& shape, DType dtype) {
    std::uint64_t n = itemsize(dtype);
    for (auto d : shape)
        if (__builtin_mul_overflow(n, static_cast<std::uint64_t>(d), &n)) return std::nullopt;
    return n;
}

TensorRecord parse_tensor(const std::string& name, const json& entry, std::uint64_t data_size, std::string_view source) {
    const std::string who = "tensor " + in_quotes(name);
    if (!entry.is_object()) fail(source, who + " is described by a " + entry.type_name() + ", expected an object");
    for (const char* key : {"dtype", "shape", "data_offsets"})
        if (!entry.contains(key)) fail(source, who + " has no \"" + key + "\"");

    TensorRecord r;
    r.name = name;
    const json& dtype = entry["dtype"];
    if (!dtype.is_string()) fail(source, who + ": \"dtype\" must be a string");
    auto dt = dtype_from_format_name(dtype.get<std::string>());
    if (!dt) fail(source, who + " has dtype " + dtype.dump() + ", which fluxion does not read (it reads " + known_dtype_names() + ")");
    r.dtype = *dt;

    const json& shape = entry["shape"];
    if (!shape.is_array()) fail(source, who + ": \"shape\" must be an array of sizes");
    for (const auto& d : shape) {
        auto n = as_count(d);
        if (!n || *n > static_cast<std::uint64_t>(INT64_MAX))
            fail(source, who + " has shape " + shape.dump() + ": sizes must be whole numbers from 0 to 2^63 - 1");
        r.shape.push_back(static_cast<std::int64_t>(*n));
    }

    const json& offsets = entry["data_offsets"];
    if (!offsets.is_array() || offsets.size() != 2 || !as_count(offsets[0]) || !as_count(offsets[1]))
        fail(source, who + " has data_offsets " + offsets.dump() + ", expected [begin, end] with whole numbers");
    r.begin = *as_count(offsets[0]);
    r.end = *as_count(offsets[1]);
    if (r.begin > r.end) fail(source, who + " has data_offsets " + offsets.dump() + " whose begin is past its end");
    if (r.end > data_size)
        fail(source, who + " needs bytes " + range_text(r.begin, r.end) + " of a data section that has only " +
                         std::to_string(data_size) + " bytes: the file is truncated or its offsets are wrong");

    auto expected = byte_size(r.shape, r.dtype);
    if (!expected)
        fail(source, who + " has shape " + shape_text(r.shape) + ", whose size in bytes does not fit in 64 bits");
    if (*expected != r.end - r.begin)
        fail(source, who + " of shape " + shape_text(r.shape) + " and dtype " + format_dtype_name(r.dtype) + " needs " +
                         std::to_string(*expected) + " bytes, but its data_offsets " + range_text(r.begin, r.end) +
                         " hold " + std::to_string(r.end - r.begin));
    return r;
}

// Ranges must cover the data section exactly once each, as the format requires.
void check_tiling(const std::vector<TensorRecord>& sorted, std::uint64_t data_size, std::string_view source) {
    std::uint64_t covered = 0;
    const TensorRecord* previous = nullptr;
    for (const auto& r : sorted) {
        if (r.begin > covered) fail(source, "bytes " + range_text(covered, r.begin) + " of the data section belong to no tensor");
        if (r.begin < covered)
            fail(source, "tensor " + in_quotes(previous->name) + " at bytes " + range_text(previous->begin, previous->end) +
                             " and tensor " + in_quotes(r.name) + " at " + range_text(r.begin, r.end) + " overlap");
        covered = r.end;
        if (r.end > r.begin) previous = &r;
    }
    if (covered < data_size) fail(source, "bytes " + range_text(covered, data_size) + " of the data section belong to no tensor");
}

}  // namespace

const char* format_dtype_name(DType t) {
    for (const auto& d : kDTypeNames)
        if (d.dtype == t) return d.name;
    return "?";
}

SafetensorsHeader parse_safetensors(std::span<const std::byte> file, std::string_view source) {
    const std::uint64_t header_size = read_header_length(file, source);
    const json header = parse_header_json(file.subspan(8, header_size), source);

    SafetensorsHeader out;
    out.data_start = 8 + header_size;
    const std::uint64_t data_size = file.size() - out.data_start;
    for (const auto& [name, entry] : header.items()) {
        if (name == kMetadataKey) out.metadata = parse_metadata(entry, source);
        else out.tensors.push_back(parse_tensor(name, entry, data_size, source));
    }
    std::sort(out.tensors.begin(), out.tensors.end(), [](const TensorRecord& a, const TensorRecord& b) {
        return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
    });
    check_tiling(out.tensors, data_size, source);
    return out;
}

void check_bool_bytes(std::span<const std::byte> bytes, const std::string& name, const std::string& where) {
    for (std::size_t i = 0; i < bytes.size(); ++i)
        if (bytes[i] != std::byte{0} && bytes[i] != std::byte{1})
            throw IOError(where + name + " is BOOL but its element " + std::to_string(i) + " is the byte " +
                          std::to_string(std::to_integer<int>(bytes[i])) +
                          "; safetensors' BOOL holds 0 or 1. Nothing was loaded.");
}

std::string encode_safetensors_header(const std::vector<TensorRecord>& tensors,
                                      const std::map<std::string, std::string>& metadata) {
    nlohmann::ordered_json header = nlohmann::ordered_json::object();
    if (!metadata.empty()) header[kMetadataKey] = metadata;
    for (const auto& t : tensors) {
        if (t.name == kMetadataKey) throw ValueError("save: the tensor name \"__metadata__\" is reserved by the safetensors format; rename the tensor");
        if (header.contains(t.name)) throw ValueError("save: two tensors are both named " + in_quotes(t.name) + "; names must be unique");
        header[t.name] = {{"dtype", format_dtype_name(t.dtype)}, {"shape", t.shape}, {"data_offsets", {t.begin, t.end}}};
    }
    std::string text;
    try {
        text = header.dump();
    } catch (const nlohmann::ordered_json::exception& e) {
        throw ValueError(std::string("save: a tensor name or metadata string is not valid UTF-8 (") + e.what() + ")");
    }
    text.append((8 - text.size() % 8) % 8, ' ');
    const std::uint64_t n = text.size();
    std::string out(8, '\0');
    std::memcpy(out.data(), &n, 8);
    return out + text;
}

}  // namespace fluxion::detail
