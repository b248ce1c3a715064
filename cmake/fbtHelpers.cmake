# cmake/fbtHelpers.cmake: CMake functions for projects that use fbt (loaded by fbtConfig.cmake, and by
# fbt's CMakeLists.txt for a project that adds fbt with add_subdirectory).
#
#   fbt_precompile_headers(<target>)
#
# Compiles fbt/fbt.hpp once as a precompiled header of <target> (CMake's target_precompile_headers), so a
# file of <target> that includes it no longer parses the library each time it is compiled: about 3 s less
# for a file that defines a fuser and checks its gradients (docs/PERFORMANCE.md, "Compile time of a user
# file"). The header is built on the first build (about 14 s) and again only when fbt's headers change.
# Another target with the same compile options can share it: target_precompile_headers(<other> REUSE_FROM <target>).
include_guard(GLOBAL)

function(fbt_precompile_headers target)
  target_precompile_headers(${target} PRIVATE <fbt/fbt.hpp>)
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    # g++ does not keep Eigen's own warning suppressions in a precompiled header (hundreds of
    # -Wignored-attributes on its packet types otherwise)
    target_compile_options(${target} PRIVATE -Wno-ignored-attributes)
  endif()
endfunction()
