# Plans with the ILP planner, exporting the model as LP and MPS; the cbc program must solve
# each file to the objective hetrl-plan reports.
execute_process(COMMAND "${TOOL}" --cluster small3.json --workload grpo_tiny.json --planner ilp
                        --export-lp "${OUT}/model.lp" --export-mps "${OUT}/model.mps"
                WORKING_DIRECTORY "${DATA}" RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "hetrl-plan failed (${rc}): ${err}")
endif()
string(REGEX MATCH "ilp: optimal; objective ([0-9.]+) s per iteration" found "${err}")
if(NOT found)
  message(FATAL_ERROR "no optimal objective in: ${err}")
endif()
set(expected ${CMAKE_MATCH_1})
find_program(CBC cbc REQUIRED)
foreach(file model.lp model.mps)
  execute_process(COMMAND "${CBC}" "${OUT}/${file}" solve RESULT_VARIABLE rc OUTPUT_VARIABLE solved)
  string(REGEX MATCH "Objective value: +([0-9.]+)" found "${solved}")
  if(NOT rc EQUAL 0 OR NOT found)
    message(FATAL_ERROR "cbc could not solve ${file}: ${solved}")
  endif()
  # CMake has no floating point: the first six digits must agree.
  string(SUBSTRING "${CMAKE_MATCH_1}" 0 7 got)
  string(SUBSTRING "${expected}" 0 7 want)
  if(NOT got STREQUAL want)
    message(FATAL_ERROR "cbc solves ${file} to ${CMAKE_MATCH_1}, hetrl-plan reported ${expected}")
  endif()
endforeach()
