# Finds libtorch (from the pinned wheel in .venv, or the folder given to scripts/setup.sh
# --torch-prefix) and the Gloo headers, and defines:
#   shardscope_torch        interface target: torch's headers and libraries for the engine
#   shardscope_gloo_headers interface target: Gloo's headers, for the one translation unit that
#                           constructs ProcessGroupGloo (see Note [Gloo headers] in setup.sh)
#   SHARDSCOPE_HAVE_CUDA / _NCCL / _CUPTI
set(_prefix_file "${PROJECT_SOURCE_DIR}/.deps/torch-prefix")
if(NOT SHARDSCOPE_TORCH_PREFIX AND EXISTS "${_prefix_file}")
  file(STRINGS "${_prefix_file}" SHARDSCOPE_TORCH_PREFIX LIMIT_COUNT 1)
endif()
set(SHARDSCOPE_TORCH_PREFIX "${SHARDSCOPE_TORCH_PREFIX}" CACHE PATH "torch package folder (holds include/, lib/, share/cmake/)")
if(NOT SHARDSCOPE_TORCH_PREFIX OR NOT EXISTS "${SHARDSCOPE_TORCH_PREFIX}/share/cmake/Torch/TorchConfig.cmake")
  message(FATAL_ERROR
    "libtorch not found (SHARDSCOPE_TORCH_PREFIX='${SHARDSCOPE_TORCH_PREFIX}'). "
    "Run ./scripts/setup.sh (installs the pinned torch wheel into .venv), or pass "
    "-DSHARDSCOPE_TORCH_PREFIX=<torch package folder>, or build without the engine: "
    "-DSHARDSCOPE_BUILD_ENGINE=OFF.")
endif()
list(PREPEND CMAKE_PREFIX_PATH "${SHARDSCOPE_TORCH_PREFIX}/share/cmake")

# A CUDA build of torch needs the CUDA toolkit just to be found by CMake (its Caffe2 config runs
# enable_language(CUDA)); nvcc is looked up where Debian and NVIDIA put it.
if(NOT CMAKE_CUDA_COMPILER)
  find_program(_nvcc nvcc PATHS /usr/local/cuda/bin NO_CACHE)
  if(_nvcc)
    set(CMAKE_CUDA_COMPILER "${_nvcc}" CACHE FILEPATH "nvcc")
  endif()
endif()
# Torch's config would otherwise compile and run a CUDA program to detect the GPUs of this machine
# (there may be none); we compile no CUDA kernels of our own, so name the architectures instead.
if(NOT DEFINED TORCH_CUDA_ARCH_LIST AND NOT DEFINED ENV{TORCH_CUDA_ARCH_LIST})
  set(TORCH_CUDA_ARCH_LIST "8.0;9.0")
endif()
# Torch's config warns at length about things that do not concern a C++ consumer.
set(_saved_log_level "${CMAKE_MESSAGE_LOG_LEVEL}")
set(CMAKE_MESSAGE_LOG_LEVEL ERROR)
find_package(Torch REQUIRED)
set(CMAKE_MESSAGE_LOG_LEVEL "${_saved_log_level}")
message(STATUS "libtorch ${Torch_VERSION} from ${SHARDSCOPE_TORCH_PREFIX}")

set(_torch_is_cuda OFF)
if(TARGET torch_cuda)
  set(_torch_is_cuda ON)
endif()
if(SHARDSCOPE_WITH_CUDA STREQUAL "AUTO")
  set(SHARDSCOPE_HAVE_CUDA ${_torch_is_cuda})
elseif(SHARDSCOPE_WITH_CUDA)
  if(NOT _torch_is_cuda)
    message(FATAL_ERROR "SHARDSCOPE_WITH_CUDA=ON but the torch in ${SHARDSCOPE_TORCH_PREFIX} is not a CUDA build")
  endif()
  set(SHARDSCOPE_HAVE_CUDA ON)
else()
  set(SHARDSCOPE_HAVE_CUDA OFF)
endif()

add_library(shardscope_torch INTERFACE)
if(SHARDSCOPE_HAVE_CUDA)
  target_link_libraries(shardscope_torch INTERFACE ${TORCH_LIBRARIES})
  # libtorch_cuda needs the NCCL, cuDNN, ... of the nvidia-* wheels beside torch, which may be newer
  # than the CUDA toolkit's copies: point the linker at them first (at run time libtorch_cuda finds
  # them through its own RUNPATH).
  file(GLOB _nvidia_lib_dirs LIST_DIRECTORIES true "${SHARDSCOPE_TORCH_PREFIX}/../nvidia/*/lib")
  foreach(_dir IN LISTS _nvidia_lib_dirs)
    get_filename_component(_dir "${_dir}" REALPATH)
    target_link_options(shardscope_torch INTERFACE "LINKER:-rpath-link,${_dir}")
  endforeach()
  target_compile_definitions(shardscope_torch INTERFACE SHARDSCOPE_HAVE_CUDA=1)
else()
  # CPU-only: link libtorch_cpu without libtorch_cuda, so the CUDA runtime libraries are not
  # needed at run time even when the wheel is a CUDA build.
  target_link_libraries(shardscope_torch INTERFACE torch_cpu c10)
  target_include_directories(shardscope_torch SYSTEM INTERFACE ${TORCH_INCLUDE_DIRS})
endif()
# c10d's Gloo backend is compiled into libtorch_cpu of every Linux wheel.
target_compile_definitions(shardscope_torch INTERFACE USE_C10D_GLOO=1 USE_DISTRIBUTED=1)

set(SHARDSCOPE_GLOO_INCLUDE_DIR "${PROJECT_SOURCE_DIR}/.deps/gloo/usr/include" CACHE PATH "Gloo headers")
if(NOT EXISTS "${SHARDSCOPE_GLOO_INCLUDE_DIR}/gloo/algorithm.h")
  message(FATAL_ERROR "Gloo headers not found in ${SHARDSCOPE_GLOO_INCLUDE_DIR}. Run ./scripts/setup.sh, "
                      "or point -DSHARDSCOPE_GLOO_INCLUDE_DIR at a folder holding gloo/algorithm.h.")
endif()
add_library(shardscope_gloo_headers INTERFACE)
target_include_directories(shardscope_gloo_headers SYSTEM INTERFACE "${SHARDSCOPE_GLOO_INCLUDE_DIR}")

# NCCL: ProcessGroupNCCL.hpp includes <nccl.h>, which the torch wheel does not carry; take the one
# of the nvidia-nccl wheel libtorch loads, else the CUDA toolkit's.
set(SHARDSCOPE_HAVE_NCCL OFF)
if(SHARDSCOPE_HAVE_CUDA AND SHARDSCOPE_WITH_NCCL)
  find_path(SHARDSCOPE_NCCL_INCLUDE_DIR nccl.h
    HINTS "${SHARDSCOPE_TORCH_PREFIX}/../nvidia/nccl/include" "${SHARDSCOPE_TORCH_PREFIX}/../nvidia/cu13/include"
          /usr/local/cuda/include /usr/include)
  if(SHARDSCOPE_NCCL_INCLUDE_DIR)
    set(SHARDSCOPE_HAVE_NCCL ON)
    add_library(shardscope_nccl_headers INTERFACE)
    target_include_directories(shardscope_nccl_headers SYSTEM INTERFACE "${SHARDSCOPE_NCCL_INCLUDE_DIR}")
    target_compile_definitions(shardscope_nccl_headers INTERFACE USE_C10D_NCCL=1)
  else()
    message(WARNING "nccl.h not found: the NCCL process group is not built")
  endif()
endif()

set(SHARDSCOPE_HAVE_CUPTI OFF)
if(SHARDSCOPE_HAVE_CUDA AND SHARDSCOPE_WITH_CUPTI)
  find_path(SHARDSCOPE_CUPTI_INCLUDE_DIR cupti.h
    HINTS "${SHARDSCOPE_TORCH_PREFIX}/../nvidia/cu13/include" "${SHARDSCOPE_TORCH_PREFIX}/../nvidia/cuda_cupti/include"
          /usr/local/cuda/extras/CUPTI/include /usr/local/cuda/include)
  if(SHARDSCOPE_CUPTI_INCLUDE_DIR)
    set(SHARDSCOPE_HAVE_CUPTI ON)
  endif()
endif()
