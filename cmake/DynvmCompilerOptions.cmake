# Compiler settings shared by every dynvm target: warnings, sanitizers, coverage, ccache.

find_program(DYNVM_CCACHE ccache)
if(DYNVM_CCACHE)
  set(CMAKE_C_COMPILER_LAUNCHER ${DYNVM_CCACHE})
  set(CMAKE_CXX_COMPILER_LAUNCHER ${DYNVM_CCACHE})
endif()

# Flags for dynvm's own sources; third-party headers come in as SYSTEM includes.
add_library(dynvm_warnings INTERFACE)
target_compile_options(dynvm_warnings INTERFACE
  -Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor -Wimplicit-fallthrough
  $<$<BOOL:${DYNVM_WERROR}>:-Werror>)

if(DYNVM_SANITIZE)
  add_compile_options(-fsanitize=address,undefined -fno-sanitize-recover=undefined
                      -fno-omit-frame-pointer)
  add_link_options(-fsanitize=address,undefined)
endif()

# gcov counters, updated atomically because kernels and the runtime run on several threads.
if(DYNVM_COVERAGE)
  add_compile_options(--coverage -fprofile-update=atomic)
  add_link_options(--coverage)
endif()
