# run(TOOL t EXIT code [EXPECT stderr regex] ARGS ...): runs a tool in ${dir}, fails the script
# unless it exits with `code` and its stderr matches; leaves `out` and `err` for more checks.
# For the CLI scripts that run several tools in one folder.
macro(run)
  cmake_parse_arguments(R "" "TOOL;EXIT;EXPECT" "ARGS" ${ARGN})
  execute_process(COMMAND "${R_TOOL}" ${R_ARGS} WORKING_DIRECTORY "${dir}"
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL R_EXIT)
    message(FATAL_ERROR "${R_ARGS}: exit ${rc}, expected ${R_EXIT}: ${err}")
  endif()
  if(R_EXPECT AND NOT err MATCHES "${R_EXPECT}")
    message(FATAL_ERROR "${R_ARGS}: stderr does not match '${R_EXPECT}': ${err}")
  endif()
endmacro()
