# Compiler settings for Shardscope's own targets: warnings, sanitizers, ccache.
#
# Third-party headers (torch, Qt, yaml-cpp) are included as SYSTEM headers by their imported
# targets, so -Werror applies to our code only.

find_program(SHARDSCOPE_CCACHE ccache)
if(SHARDSCOPE_CCACHE AND NOT CMAKE_CXX_COMPILER_LAUNCHER)
  # Note [ccache and precompiled headers]: ccache only reuses PCH-using objects with these
  # sloppiness settings; the base dir makes hits survive a fresh clone in another folder.
  set(CMAKE_CXX_COMPILER_LAUNCHER
      ${CMAKE_COMMAND} -E env
      CCACHE_SLOPPINESS=pch_defines,time_macros,include_file_mtime,include_file_ctime
      CCACHE_BASEDIR=${CMAKE_SOURCE_DIR} CCACHE_NOHASHDIR=1
      ${SHARDSCOPE_CCACHE})
  message(STATUS "Using ccache: ${SHARDSCOPE_CCACHE}")
endif()

set(SHARDSCOPE_WARNING_FLAGS -Wall -Wextra -Wpedantic -Wnon-virtual-dtor
    -Wold-style-cast -Wcast-align -Woverloaded-virtual -Wimplicit-fallthrough)
if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
  list(APPEND SHARDSCOPE_WARNING_FLAGS -Wshadow=local) # GCC's spelling; clang (the fuzz preset) lacks it
endif()
if(SHARDSCOPE_WARNINGS_AS_ERRORS)
  list(APPEND SHARDSCOPE_WARNING_FLAGS -Werror)
endif()

set(SHARDSCOPE_SANITIZER_FLAGS "")
if(SHARDSCOPE_SANITIZE)
  string(REPLACE ";" "," _sanitizers "${SHARDSCOPE_SANITIZE}")
  set(SHARDSCOPE_SANITIZER_FLAGS -fsanitize=${_sanitizers} -fno-omit-frame-pointer
      -fno-sanitize-recover=undefined)
  add_compile_options(${SHARDSCOPE_SANITIZER_FLAGS})
  add_link_options(-fsanitize=${_sanitizers})
endif()

# The fuzz preset: every target of ours gets libFuzzer's coverage instrumentation, so that the
# loaders' branches guide it; only the fuzz targets link libFuzzer itself (tests/fuzz).
if(SHARDSCOPE_LIBFUZZER)
  if(NOT CMAKE_CXX_COMPILER_ID MATCHES "Clang")
    message(FATAL_ERROR "SHARDSCOPE_LIBFUZZER needs clang (the fuzz preset uses clang++-14)")
  endif()
  add_compile_options(-fsanitize=fuzzer-no-link)
endif()

# shardscope_target_defaults(<target>): what every Shardscope target gets. Include paths are
# rooted at the repository so that an include names the layer it crosses
# (#include "storage/run_store.h").
function(shardscope_target_defaults target)
  target_compile_options(${target} PRIVATE ${SHARDSCOPE_WARNING_FLAGS})
  get_target_property(_type ${target} TYPE)
  if(_type STREQUAL "INTERFACE_LIBRARY")
    target_include_directories(${target} INTERFACE ${PROJECT_SOURCE_DIR})
  else()
    target_include_directories(${target} PUBLIC ${PROJECT_SOURCE_DIR})
  endif()
endfunction()
