# hetrl-plan capacity on a small market: the cluster it finds, planned alone, reaches the target
# at the samples/s the search says; its written plan is a plan of that cluster; the front rises
# in price and throughput and only its last cluster reaches the target; the CSV has a line a
# cluster of the front. A target no cluster of the market reaches: exit 1, one line with the
# fastest found, no files.
#   TOOL: hetrl-plan; DATA: tests/cli/data; OUT: a scratch folder.
include(${CMAKE_CURRENT_LIST_DIR}/sps_checks.cmake)
set(WORKLOAD grpo_small.json)
set(MARKET market_small.json)
set(TARGET 20)
file(REMOVE ${OUT}/capacity.json ${OUT}/capacity.csv ${OUT}/capacity_plan.json ${OUT}/capacity_cluster.json)
execute_process(COMMAND "${TOOL}" capacity --workload ${WORKLOAD} --market ${MARKET} --target-samples-per-s ${TARGET}
                        --pareto --json ${OUT}/capacity.json --csv ${OUT}/capacity.csv -o ${OUT}/capacity_plan.json
                        --write-cluster ${OUT}/capacity_cluster.json
                WORKING_DIRECTORY "${DATA}" RESULT_VARIABLE rc OUTPUT_VARIABLE table ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "capacity failed (${rc}): ${err}")
endif()
file(READ ${OUT}/capacity.json json)
string(JSON proven GET "${json}" proven)
string(JSON sps GET "${json}" cheapest samples_per_second)
string(JSON usd GET "${json}" cheapest usd_per_hour)
if(NOT proven OR sps LESS TARGET)
  message(FATAL_ERROR "the cheapest cluster: proven ${proven}, ${sps} samples/s against a target of ${TARGET}")
endif()

# The cluster written, planned alone: the same samples/s (to the hundredth it prints).
execute_process(COMMAND "${TOOL}" --cluster ${OUT}/capacity_cluster.json --workload ${WORKLOAD} WORKING_DIRECTORY "${DATA}"
                RESULT_VARIABLE rc OUTPUT_VARIABLE alone ERROR_VARIABLE err)
string(REGEX MATCH "\\| ([0-9.]+) samples/s \\|" line "${alone}")
set(alone_sps ${CMAKE_MATCH_1})
if(NOT rc EQUAL 0 OR line STREQUAL "")
  message(FATAL_ERROR "the cluster found, planned alone: exit ${rc}: ${err}")
endif()
check_same_hundredths("${alone_sps}" "${sps}" "the cluster found, by the search")
# Its plan is one of that cluster.
execute_process(COMMAND "${TOOL}" evaluate --cluster ${OUT}/capacity_cluster.json --workload ${WORKLOAD}
                        --plan ${OUT}/capacity_plan.json
                WORKING_DIRECTORY "${DATA}" RESULT_VARIABLE rc OUTPUT_VARIABLE evaluated ERROR_VARIABLE err)
string(FIND "${evaluated}" "| ${alone_sps} samples/s |" at)
if(NOT rc EQUAL 0 OR at EQUAL -1)
  message(FATAL_ERROR "the plan written, evaluated on the cluster written: exit ${rc}: ${err}${evaluated}")
endif()

# The front: cheapest first, each faster than the one before, the last the cluster found.
string(JSON points LENGTH "${json}" front)
if(points LESS 2)
  message(FATAL_ERROR "a front of ${points} clusters: ${json}")
endif()
math(EXPR last "${points} - 1")
set(previous_usd -1)
set(previous_sps -1)
foreach(i RANGE ${last})
  string(JSON p_usd GET "${json}" front ${i} usd_per_hour)
  string(JSON p_sps GET "${json}" front ${i} samples_per_second)
  string(JSON p_reaches GET "${json}" front ${i} reaches_target)
  if(NOT p_usd GREATER previous_usd OR NOT p_sps GREATER previous_sps)
    message(FATAL_ERROR "front ${i}: \$${p_usd}/h, ${p_sps} samples/s after \$${previous_usd}/h, ${previous_sps}")
  endif()
  if((i EQUAL last) AND (NOT p_reaches OR NOT p_usd EQUAL usd OR NOT p_sps EQUAL sps))
    message(FATAL_ERROR "the front's last cluster is not the one found: \$${p_usd}/h, ${p_sps} samples/s")
  endif()
  if((i LESS last) AND (p_reaches OR NOT p_sps LESS TARGET))
    message(FATAL_ERROR "front ${i} reaches the target before the last: ${p_sps} samples/s")
  endif()
  set(previous_usd ${p_usd})
  set(previous_sps ${p_sps})
endforeach()
file(STRINGS ${OUT}/capacity.csv csv)
list(LENGTH csv lines)
math(EXPR expected "${points} + 1")
if(NOT lines EQUAL expected)
  message(FATAL_ERROR "the CSV has ${lines} lines, expected a header and ${points} clusters")
endif()

# Past what the market can reach: exit 1, one line naming the fastest found, no files.
file(REMOVE ${OUT}/capacity_none.json)
execute_process(COMMAND "${TOOL}" capacity --workload ${WORKLOAD} --market ${MARKET} --target-samples-per-s 500
                        --json ${OUT}/capacity_none.json
                WORKING_DIRECTORY "${DATA}" RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
string(REGEX MATCHALL "\n" breaks "${err}")
list(LENGTH breaks said)
string(REGEX MATCH "reaches 500 samples/s: the fastest found reaches ([0-9.]+) samples/s \\([0-9]+ GPUs: " reached "${err}")
if(NOT rc EQUAL 1 OR reached STREQUAL "" OR NOT said EQUAL 1 OR NOT out STREQUAL "" OR EXISTS ${OUT}/capacity_none.json)
  message(FATAL_ERROR "an unreachable target: exit ${rc}, stdout '${out}', stderr '${err}'")
endif()
# The fastest found is at least the cluster found for the reachable target.
if(CMAKE_MATCH_1 LESS sps)
  message(FATAL_ERROR "the fastest found, ${CMAKE_MATCH_1} samples/s, is below ${sps}")
endif()
