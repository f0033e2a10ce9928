// The header from C++: compiled by scripts/capi.sh with g++ -std=c++17 -Wall -Wextra -Werror,
// linked against the hosted static library and run. Declarations only need to agree; this
// checks that they compile warning-free in C++ and link to the library's symbols.
#define CW_HOSTED
#include "causeway.h"

#include <cstdio>

static_assert(sizeof(cw_frontier) == 8, "a handle is one 64-bit word");
static_assert(CW_STATUS_OK == 0, "success is zero");

extern "C" uint32_t cpp_callback(void *user_data) {
    return static_cast<uint32_t>(*static_cast<int *>(user_data));
}

int main() {
    cw_frontier frontier{};
    if (cw_frontier_create(&frontier) != CW_STATUS_OK) return 1;
    cw_device_config config{};
    if (cw_device_config_default(&config) != CW_STATUS_OK) return 1;
    cw_host_fn host = cpp_callback;
    cw_op op{nullptr, 0, nullptr, 0, host, nullptr};
    cw_device device{};
    // A null device handle: refused with a code, not undefined behaviour.
    cw_receipt receipt{};
    if (cw_device_try_submit(device, 0, &op, &receipt) != CW_STATUS_NULL_HANDLE) return 1;
    std::printf("C++: %s\n", cw_last_error_message());
    return cw_frontier_destroy(frontier) == CW_STATUS_OK ? 0 : 1;
}
