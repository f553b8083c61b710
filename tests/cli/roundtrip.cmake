# Builds a cluster from flags, validates the file, rebuilds it from the same flags and checks
# the two files are byte-identical (deterministic output), then checks that `show` of the
# file and of the flags' table agree.
set(flags --preset-node us-east-1a:2xp4de.24xlarge --node us-west-2a:3x4xL40S:nic_gbps=200
          --link us-east-1a,us-west-2a:gbps=10,latency_ms=30 --gpu-price L40S=2.5)
foreach(i 1 2)
  execute_process(COMMAND "${TOOL}" ${flags} -o "${OUT}/roundtrip${i}.json"
                  RESULT_VARIABLE rc OUTPUT_VARIABLE table${i} ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "build ${i} failed (${rc}): ${err}")
  endif()
endforeach()
file(READ "${OUT}/roundtrip1.json" first)
file(READ "${OUT}/roundtrip2.json" second)
if(NOT first STREQUAL second)
  message(FATAL_ERROR "the same flags gave different files")
endif()
execute_process(COMMAND "${TOOL}" validate "${OUT}/roundtrip1.json" RESULT_VARIABLE rc
                OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "the built file does not validate: ${err}")
endif()
execute_process(COMMAND "${TOOL}" show "${OUT}/roundtrip1.json" RESULT_VARIABLE rc
                OUTPUT_VARIABLE shown ERROR_VARIABLE err)
string(REPLACE "wrote ${OUT}/roundtrip1.json\n\n" "" table "${table1}")
if(NOT rc EQUAL 0 OR NOT shown STREQUAL table)
  message(FATAL_ERROR "show of the file differs from the table printed when building:\n${shown}\n---\n${table}")
endif()
# 16 A100 + 12 L40S; 2 x 40.97 + 12 x 2.5 USD/hour.
foreach(piece "28 GPUs in 5 nodes" "111.94" "30.000  link")
  string(FIND "${shown}" "${piece}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "show lacks \"${piece}\":\n${shown}")
  endif()
endforeach()
