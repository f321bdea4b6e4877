// Version of the suite and the git revision it was built from.
#pragma once

namespace mori::symm {
const char* version() noexcept;
const char* git_revision() noexcept;
}  // namespace mori::symm
