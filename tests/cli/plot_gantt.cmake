# scripts/plot gantt on a trace hetrl-sim wrote: a PNG and an SVG, the SVG naming every task
# the trace has; a file that is not a trace exits 2 with one line and writes nothing.
#   SIM: hetrl-sim; PLOT: scripts/plot; DATA: tests/cli/data; OUT: a scratch folder.
file(REMOVE ${OUT}/gantt_trace.json ${OUT}/gantt.png ${OUT}/gantt.svg ${OUT}/gantt_bad.png ${OUT}/gantt_bad.svg)
execute_process(COMMAND ${SIM} --cluster valid.json --workload grpo_small.json --plan plan_hand.json --iterations 2
                        --trace ${OUT}/gantt_trace.json
                WORKING_DIRECTORY ${DATA} RESULT_VARIABLE rc OUTPUT_QUIET ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "hetrl-sim failed (${rc}): ${err}")
endif()
execute_process(COMMAND ${PLOT} gantt ${OUT}/gantt_trace.json ${OUT}/gantt RESULT_VARIABLE rc OUTPUT_VARIABLE out
                ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "scripts/plot gantt failed (${rc}): ${err}")
endif()
file(READ ${OUT}/gantt.png magic LIMIT 8 HEX)
if(NOT magic STREQUAL "89504e470d0a1a0a")
  message(FATAL_ERROR "gantt.png is not a PNG (starts ${magic})")
endif()
file(READ ${OUT}/gantt.svg svg)
file(READ ${OUT}/gantt_trace.json trace)
string(JSON events LENGTH "${trace}" traceEvents)
math(EXPR last "${events} - 1")
foreach(i RANGE ${last})
  string(JSON cat ERROR_VARIABLE none GET "${trace}" traceEvents ${i} cat)
  if(NOT cat STREQUAL "task")
    continue()
  endif()
  string(JSON name GET "${trace}" traceEvents ${i} name)
  string(FIND "${svg}" ">${name}<" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "gantt.svg does not name the task ${name}")
  endif()
endforeach()
# Not a trace: the cluster file.
execute_process(COMMAND ${PLOT} gantt ${DATA}/valid.json ${OUT}/gantt_bad RESULT_VARIABLE rc OUTPUT_VARIABLE out
                ERROR_VARIABLE err)
string(REGEX MATCHALL "\n" lines "${err}")
list(LENGTH lines said)
string(FIND "${err}" "plot: error: " at)
if(NOT rc EQUAL 2 OR NOT said EQUAL 1 OR at EQUAL -1 OR EXISTS ${OUT}/gantt_bad.png OR EXISTS ${OUT}/gantt_bad.svg)
  message(FATAL_ERROR "a cluster file as the trace: exit ${rc}, stderr '${err}'")
endif()
