# Run as: cmake -DSOURCE_DIR=<repo> -P check_layering.cmake
# Fails (FATAL_ERROR) with every offending file:line when a layer includes what it must not.
set(_qt_regex "#[ \t]*include[ \t]*[<\"](Q[A-Za-z]+|qcustomplot\\.h|Qt[A-Za-z]+/)")
set(_torch_regex "#[ \t]*include[ \t]*[<\"](torch/|ATen/|c10/|caffe2/|gloo/|nccl\\.h|cupti)")
set(_problems "")

function(_scan dirs regex what)
  foreach(dir IN LISTS dirs)
    file(GLOB_RECURSE _files "${SOURCE_DIR}/${dir}/*.h" "${SOURCE_DIR}/${dir}/*.hpp"
                             "${SOURCE_DIR}/${dir}/*.cpp" "${SOURCE_DIR}/${dir}/*.cu")
    foreach(f IN LISTS _files)
      file(STRINGS "${f}" _lines REGEX "${regex}")
      foreach(line IN LISTS _lines)
        file(RELATIVE_PATH _rel "${SOURCE_DIR}" "${f}")
        string(STRIP "${line}" line)
        list(APPEND _problems "  ${_rel}: ${line}  (${what})")
      endforeach()
    endforeach()
  endforeach()
  set(_problems "${_problems}" PARENT_SCOPE)
endfunction()

_scan("engine;profiler;storage" "${_qt_regex}" "Qt is not allowed in this layer")
_scan("ui;storage;app/cli;app/launcher;app/gui" "${_torch_regex}" "torch is allowed only in engine/")
_scan("engine/config;engine/protocol;engine/common" "${_torch_regex}" "engine/config, engine/protocol and engine/common must build without torch")
# The profiler may use CUPTI (profiler/cupti) but never torch.
_scan("profiler" "#[ \t]*include[ \t]*[<\"](torch/|ATen/|c10/)" "torch is not allowed in profiler/")

if(_problems)
  list(JOIN _problems "\n" _text)
  message(FATAL_ERROR "Layering violations:\n${_text}\nSee ../shared/DESIGN.md, 'Folders'.")
endif()
