# What every scripts/plot test checks, included by plot_gantt.cmake and plot_speedup.cmake.
#   PLOT: scripts/plot; OUT: a scratch folder.

# Draws `what` from `input` as OUT/name.png and .svg: the run succeeds and the PNG is one; the
# SVG's text in the variable `svg`.
function(plot_ok what input name)
  file(REMOVE ${OUT}/${name}.png ${OUT}/${name}.svg)
  execute_process(COMMAND ${PLOT} ${what} ${input} ${OUT}/${name} RESULT_VARIABLE rc OUTPUT_VARIABLE out
                  ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "scripts/plot ${what} failed (${rc}): ${err}")
  endif()
  file(READ ${OUT}/${name}.png magic LIMIT 8 HEX)
  if(NOT magic STREQUAL "89504e470d0a1a0a")
    message(FATAL_ERROR "${name}.png is not a PNG (starts ${magic})")
  endif()
  file(READ ${OUT}/${name}.svg text)
  set(svg "${text}" PARENT_SCOPE)
endfunction()

# Drawing `what` from `input`, which is not what it reads, exits 2 with one line and writes nothing.
function(plot_refused what input)
  file(REMOVE ${OUT}/refused.png ${OUT}/refused.svg)
  execute_process(COMMAND ${PLOT} ${what} ${input} ${OUT}/refused RESULT_VARIABLE rc OUTPUT_VARIABLE out
                  ERROR_VARIABLE err)
  string(REGEX MATCHALL "\n" lines "${err}")
  list(LENGTH lines said)
  string(FIND "${err}" "plot: error: " at)
  if(NOT rc EQUAL 2 OR NOT said EQUAL 1 OR at EQUAL -1 OR EXISTS ${OUT}/refused.png OR EXISTS ${OUT}/refused.svg)
    message(FATAL_ERROR "${what} of ${input}: exit ${rc}, stderr '${err}'")
  endif()
endfunction()
