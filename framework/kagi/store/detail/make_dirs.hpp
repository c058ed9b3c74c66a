// store/detail/make_dirs.hpp — mkdir -p for data.dir and the folders watched below it.
#pragma once

#include <sys/types.h>

#include <string>
#include <system_error>

namespace kagi::store::detail {

// Creates `dir` and its missing parents with `mode` (the data's folder mode: it holds what
// users wrote); existing folders are fine and keep their mode.
std::error_code make_dirs(const std::string& dir, mode_t mode);

}  // namespace kagi::store::detail
