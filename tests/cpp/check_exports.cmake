# cmake -DNM=<nm> -DPLUGIN=<file> -P check_exports.cmake
# Fails unless PLUGIN's dynamic symbol table defines exactly one symbol,
# jaxonnx_plugin_init_v1 (version-definition entries, type A, are ignored).
execute_process(COMMAND "${NM}" -D --defined-only "${PLUGIN}"
                OUTPUT_VARIABLE _out ERROR_VARIABLE _err RESULT_VARIABLE _rc)
if(NOT _rc EQUAL 0)
  message(FATAL_ERROR "nm failed on ${PLUGIN} (${_rc}): ${_err}")
endif()
string(REPLACE "\n" ";" _lines "${_out}")
set(_symbols "")
foreach(_line IN LISTS _lines)
  if(_line MATCHES "^[0-9a-fA-F]* *([A-Za-z]) +([^ ]+)$")
    if(NOT CMAKE_MATCH_1 STREQUAL "A")
      list(APPEND _symbols "${CMAKE_MATCH_2}")
    endif()
  endif()
endforeach()
list(LENGTH _symbols _n)
if(NOT _n EQUAL 1 OR NOT _symbols STREQUAL "jaxonnx_plugin_init_v1")
  message(FATAL_ERROR "${PLUGIN} exports ${_n} symbols (${_symbols}); expected exactly "
                      "jaxonnx_plugin_init_v1\nnm output:\n${_out}")
endif()
message(STATUS "${PLUGIN} exports exactly jaxonnx_plugin_init_v1")
