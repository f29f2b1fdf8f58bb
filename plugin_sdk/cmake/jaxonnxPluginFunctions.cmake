# jaxonnx_add_plugin(<name> SOURCES <src>... [OUTPUT_DIRECTORY <dir>])
#
# Builds a jaxonnx plugin: a MODULE library linked only against the SDK, with
# hidden visibility, so that jaxonnx_plugin_init_v1 is its one exported symbol.
function(jaxonnx_add_plugin name)
  cmake_parse_arguments(ARG "" "OUTPUT_DIRECTORY" "SOURCES" ${ARGN})
  if(NOT ARG_SOURCES)
    message(FATAL_ERROR "jaxonnx_add_plugin(${name}): SOURCES is required")
  endif()
  add_library(${name} MODULE ${ARG_SOURCES})
  target_link_libraries(${name} PRIVATE jaxonnx::sdk)
  set_target_properties(${name} PROPERTIES
    PREFIX ""
    CXX_VISIBILITY_PRESET hidden
    C_VISIBILITY_PRESET hidden
    VISIBILITY_INLINES_HIDDEN ON
    POSITION_INDEPENDENT_CODE ON)
  target_compile_features(${name} PRIVATE cxx_std_17)
  if(CMAKE_SYSTEM_NAME STREQUAL "Linux")
    # A version script makes "one exported symbol" a guarantee, not a hope.
    set(_map "${CMAKE_CURRENT_BINARY_DIR}/${name}.exports.map")
    file(WRITE "${_map}" "{ global: jaxonnx_plugin_init_v1; local: *; };\n")
    target_link_options(${name} PRIVATE "LINKER:--version-script=${_map}" "LINKER:--no-undefined")
  endif()
  if(ARG_OUTPUT_DIRECTORY)
    set_target_properties(${name} PROPERTIES LIBRARY_OUTPUT_DIRECTORY "${ARG_OUTPUT_DIRECTORY}")
  endif()
endfunction()
