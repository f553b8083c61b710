# ctest names each doctest case after its title; a ';' splits the name into a CMake list, and
# the case then runs under a filter that matches nothing and passes without running. Fails when
# a case's title has one.
execute_process(COMMAND "${EXE}" --list-test-cases OUTPUT_VARIABLE out RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "listing the test cases failed (${rc})")
endif()
string(FIND "${out}" ";" at)
if(NOT at EQUAL -1)
  message(FATAL_ERROR "a test case's title has a ';' (ctest would not run it): ${out}")
endif()
