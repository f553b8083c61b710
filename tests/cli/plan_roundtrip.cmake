# Plans with each planner and writes the plan, twice: the files must be byte-identical
# (deterministic planners) but for the time planning took, the one field that may differ.
# Then evaluating the written plan must predict what planning printed.
foreach(planner verl streamrl hybrid)
  foreach(i 1 2)
    execute_process(COMMAND "${TOOL}" --cluster valid.json --workload grpo_small.json
                            --planner ${planner} -o "${OUT}/plan_${planner}_${i}.json"
                    WORKING_DIRECTORY "${DATA}" RESULT_VARIABLE rc OUTPUT_VARIABLE planned
                    ERROR_VARIABLE err)
    if(NOT rc EQUAL 0)
      message(FATAL_ERROR "${planner}: planning failed (${rc}): ${err}")
    endif()
  endforeach()
  file(READ "${OUT}/plan_${planner}_1.json" first)
  file(READ "${OUT}/plan_${planner}_2.json" second)
  foreach(text first second)
    string(FIND "${${text}}" "\"planning_seconds\"" at)
    if(at EQUAL -1)
      message(FATAL_ERROR "${planner}: the plan does not record planning_seconds")
    endif()
    string(REGEX REPLACE "\"planning_seconds\": [0-9.e+-]+" "" ${text} "${${text}}")
  endforeach()
  if(NOT first STREQUAL second)
    message(FATAL_ERROR "${planner}: the same inputs gave different plan files")
  endif()
  execute_process(COMMAND "${TOOL}" evaluate --cluster valid.json --workload grpo_small.json
                          --plan "${OUT}/plan_${planner}_1.json"
                  WORKING_DIRECTORY "${DATA}" RESULT_VARIABLE rc OUTPUT_VARIABLE evaluated
                  ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${planner}: evaluating the written plan failed (${rc}): ${err}")
  endif()
  string(REGEX MATCH "iteration [0-9.]+ s \\| [0-9.]+ samples/s" planned_line "${planned}")
  string(REGEX MATCH "iteration [0-9.]+ s \\| [0-9.]+ samples/s" evaluated_line "${evaluated}")
  if(planned_line STREQUAL "" OR NOT planned_line STREQUAL evaluated_line)
    message(FATAL_ERROR "${planner}: planned '${planned_line}' but the file evaluates to '${evaluated_line}'")
  endif()
endforeach()
