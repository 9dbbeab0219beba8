# The layering rule, checked on every build: the parts of docs/ARCHITECTURE.md and their arrows
# (which part may include which, which may use Qt, torch or CUPTI). A violation fails the build.
function(shardscope_add_layering_check)
  add_custom_target(layering_check ALL
    COMMAND ${CMAKE_COMMAND} -DSOURCE_DIR=${PROJECT_SOURCE_DIR}
            -P ${PROJECT_SOURCE_DIR}/cmake/check_layering.cmake
    COMMENT "Checking layering (the parts and arrows of docs/ARCHITECTURE.md)"
    VERBATIM)
endfunction()
