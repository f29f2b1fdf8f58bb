# Writes SHA256SUMS, the bundled plugins' manifest, into JXO_MANIFEST_DIR: one
# "<sha256>  <file name>" line per file of JXO_MANIFEST_FILES (sha256sum's
# format, so `sha256sum -c SHA256SUMS` in that folder checks it too). Run at
# install time, after the plugins are installed (and stripped): it hashes the
# files exactly as the package ships them. jaxonnx/_preflight.py refuses a
# bundled plugin whose file no longer matches.
if(NOT JXO_MANIFEST_DIR OR NOT JXO_MANIFEST_FILES)
  message(FATAL_ERROR "write_plugin_manifest.cmake needs JXO_MANIFEST_DIR and JXO_MANIFEST_FILES")
endif()
list(SORT JXO_MANIFEST_FILES)
set(_lines "")
foreach(_name IN LISTS JXO_MANIFEST_FILES)
  set(_file "${JXO_MANIFEST_DIR}/${_name}")
  if(NOT EXISTS "${_file}")
    message(FATAL_ERROR "the bundled plugin ${_file} was not installed; cannot write its manifest")
  endif()
  file(SHA256 "${_file}" _hash)
  string(APPEND _lines "${_hash}  ${_name}\n")
endforeach()
file(WRITE "${JXO_MANIFEST_DIR}/SHA256SUMS" "${_lines}")
message(STATUS "Manifest: ${JXO_MANIFEST_DIR}/SHA256SUMS")
