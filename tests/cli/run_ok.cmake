# Runs a command; fails the test with its output unless it exits 0. Leaves stdout in `out`.
# (included by the chain scripts: profile_chain, profile_mpi, exec_chain, exec_mpi, exec_fit)
function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${ARGN}\nexit ${rc}\n${out}\n${err}")
  endif()
  set(out "${out}" PARENT_SCOPE)
endfunction()
