# cmake -DGOOD=<a real plugin> -DDIR=<folder> -P make_garbage.cmake
# Fills DIR with files a plugin host must skip without crashing:
#   garbage.so    a text file
#   truncated.so  the first 3000 bytes of a real plugin
file(MAKE_DIRECTORY "${DIR}")
# Longer than an ELF header, so dlopen reads it and says "invalid ELF header".
file(WRITE "${DIR}/garbage.so"
     "This is a text file named like a plugin. It is not a shared object, and a\n"
     "plugin host must skip it with a diagnostic instead of crashing.\n")
execute_process(COMMAND head -c 3000 "${GOOD}" OUTPUT_FILE "${DIR}/truncated.so"
                RESULT_VARIABLE _rc)
if(NOT _rc EQUAL 0)
  message(FATAL_ERROR "could not write ${DIR}/truncated.so (head -c failed: ${_rc})")
endif()
file(SIZE "${DIR}/truncated.so" _size)
if(NOT _size EQUAL 3000)
  message(FATAL_ERROR "truncated.so has ${_size} bytes, expected 3000")
endif()
