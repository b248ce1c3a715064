# cmake/fbtHelpers.cmake: CMake functions for projects that use fbt (loaded by fbtConfig.cmake, and by
# fbt's CMakeLists.txt for a project that adds fbt with add_subdirectory).
#
#   fbt_precompile_headers(<target>)
#   fbt_add_plugin(<name> <source>...)      (below)
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

# fbt_add_plugin(<name> <source>...)
#
# A plugin: the shared object lib<name>.so, built from your own file(s) with fbt/plugin.hpp included and your
# pieces registered (FBT_REGISTER_FUSER(...) and its siblings), which the stock `fbt` command loads with
# `--plugin path/lib<name>.so` and Python with fbt.load_plugin (docs/api.md, "Your own piece in a plugin").
# It compiles against fbt's headers only: the pieces and nothing of the library's loop, with hidden visibility
# (only the plugin's two entry points are exported, so its copies of fbt's inline code stay its own).
function(fbt_add_plugin name)
  if(NOT ARGN)
    message(FATAL_ERROR "fbt_add_plugin(${name}): give the plugin's source files")
  endif()
  add_library(${name} MODULE ${ARGN})
  target_link_libraries(${name} PRIVATE fbt::fbt)
  set_target_properties(${name} PROPERTIES PREFIX "lib" CXX_VISIBILITY_PRESET hidden VISIBILITY_INLINES_HIDDEN ON)
endfunction()
