# The layering rule, checked on every build: engine/, profiler/ and storage/ never include Qt,
# and nothing outside engine/ includes torch (app/worker's main is the one exception allowed by
# the house style, though today it includes engine headers only). A violation fails the build.
function(shardscope_add_layering_check)
  add_custom_target(layering_check ALL
    COMMAND ${CMAKE_COMMAND} -DSOURCE_DIR=${PROJECT_SOURCE_DIR}
            -P ${PROJECT_SOURCE_DIR}/cmake/check_layering.cmake
    COMMENT "Checking layering (no Qt in engine/profiler/storage, no torch outside engine/)"
    VERBATIM)
endfunction()
