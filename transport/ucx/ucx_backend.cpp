// ucx_backend.cpp — placeholder until the UCX backend lands in this file.
#include "transport/backend.hpp"

#include <weft/config.hpp>

namespace weft {
bool ucx_backend_built() { return false; }
Status create_ucx_backend(Runtime&, std::unique_ptr<Backend>&) {
    return WEFT_FAIL(WEFT_ERR_UNSUPPORTED, "the UCX backend is not built");
}
}  // namespace weft
