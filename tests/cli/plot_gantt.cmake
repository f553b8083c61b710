# scripts/plot gantt on a trace hetrl-sim wrote: a PNG and an SVG, the SVG naming every task
# the trace has; a file that is not a trace exits 2 with one line and writes nothing.
#   SIM: hetrl-sim; PLOT: scripts/plot; DATA: tests/cli/data; OUT: a scratch folder.
include(${CMAKE_CURRENT_LIST_DIR}/plot_checks.cmake)
file(REMOVE ${OUT}/gantt_trace.json)
execute_process(COMMAND ${SIM} --cluster valid.json --workload grpo_small.json --plan plan_hand.json --iterations 2
                        --trace ${OUT}/gantt_trace.json
                WORKING_DIRECTORY ${DATA} RESULT_VARIABLE rc OUTPUT_QUIET ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "hetrl-sim failed (${rc}): ${err}")
endif()
plot_ok(gantt ${OUT}/gantt_trace.json gantt)
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
plot_refused(gantt ${DATA}/valid.json)  # a cluster file, not a trace
