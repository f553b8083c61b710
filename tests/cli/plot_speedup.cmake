# scripts/plot speedup on the committed paper benchmark CSV: a PNG and an SVG whose two panels'
# legends each name every model and algorithm of the CSV and whose axes name the networks; a file that is not the
# benchmark's CSV exits 2 with one line and writes nothing.
#   PLOT: scripts/plot; CSV: benchmarks/results/paper.csv; DATA: tests/cli/data; OUT: a scratch folder.
include(${CMAKE_CURRENT_LIST_DIR}/plot_checks.cmake)
plot_ok(speedup ${CSV} speedup)
file(STRINGS ${CSV} rows)
list(REMOVE_AT rows 0)
foreach(row ${rows})
  # Each model and algorithm is in both panels' legends: sync against verl, async against streamrl.
  string(REGEX MATCH "^[^,]*,([^,]*)-(sync|async)," unused "${row}")
  string(REGEX MATCHALL ">${CMAKE_MATCH_1}<" named "${svg}")
  list(LENGTH named times)
  if(NOT times EQUAL 2)
    message(FATAL_ERROR "speedup.svg names the workload ${CMAKE_MATCH_1} ${times} times, expected once a panel")
  endif()
endforeach()
foreach(network "one region" "multi-country" "multi-continent")
  string(FIND "${svg}" "${network}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "speedup.svg does not name the network ${network}")
  endif()
endforeach()
plot_refused(speedup ${DATA}/valid.json)  # a cluster file, not the benchmark's CSV
