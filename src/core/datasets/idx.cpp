// idx.cpp — read_idx: an IDX file (idx_format.cpp reads and checks it) as a tensor.
#include <string>

#include "core/datasets/idx_format.hpp"
#include "fluxion/datasets.hpp"

namespace fluxion::datasets {
namespace fs = std::filesystem;

Tensor read_idx(const fs::path& path) {
    const std::string where = "read_idx(\"" + path.string() + "\")";
    std::error_code ec;
    if (!fs::exists(path, ec)) throw IOError(where + ": no such file");
    if (fs::is_directory(path, ec)) throw IOError(where + ": this is a folder; pass the path of an IDX file");
    const detail::IdxContents contents = detail::read_idx_contents(path, where);
    Tensor t = empty(contents.shape, {.dtype = contents.type.dtype});
    detail::decode_idx(contents, t.data_ptr());
    return t;
}

}  // namespace fluxion::datasets
