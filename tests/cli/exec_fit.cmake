# The calibration loop's second half on the cpu backend: hetrl-exec --fit-profile writes a
# profile of the run's GPU type whose fitted figures hetrl-cluster adopts, and whose table is
# the run's own measurements. Checks how the files agree, never how fast the machine is.
#   EXEC, CLUSTER, PLAN: the tools; DATA: tests/cli/data; OUT: a scratch folder.
include(${CMAKE_CURRENT_LIST_DIR}/run_ok.cmake)

set(fit ${OUT}/exec_fit_profile.json)
set(report ${OUT}/exec_fit_report.json)
set(calibrated ${OUT}/exec_fit_cluster.json)
file(REMOVE ${fit} ${report} ${calibrated})
run(${EXEC} --cluster ${DATA}/exec_cluster.json --workload ${DATA}/exec_ppo.json --plan ${DATA}/plan_exec_ppo.json
    --layers 1 --hidden 64 --vocab 512 --backend cpu --iterations 3 --report ${report} --fit-profile ${fit})
# The optimizer efficiency fitted on the two trainers' timed optimizer steps, the copy
# efficiency on the weight sync (training and generation share the GPUs and the layout), the
# prefill efficiency on generation's timed prefills.
foreach(piece "fitted on the measured tasks" "pass efficiency" "on the optimizer steps of 2 training tasks"
        "weight copy efficiency" "on the prefills of 1 generation task" "wrote ${fit}")
  string(FIND "${out}" "${piece}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "the output lacks \"${piece}\":\n${out}")
  endif()
endforeach()
file(READ ${fit} profile)
file(READ ${report} measured)
string(JSON schema GET "${profile}" schema)
string(JSON type GET "${profile}" gpu_type)
string(JSON tool GET "${profile}" generator tool)
string(JSON iterations GET "${profile}" fitted calibration iterations)
if(NOT schema STREQUAL "hetrl.profile/v2" OR NOT type STREQUAL "L4" OR NOT tool STREQUAL "hetrl-exec" OR NOT iterations EQUAL 3)
  message(FATAL_ERROR "unexpected profile header: ${schema}, ${type}, ${tool}, ${iterations} iterations")
endif()
# Each GPU task's row and the weight sync's: its measured seconds are the report's median of
# the three iterations.
string(JSON rows LENGTH "${profile}" fitted calibration tasks)
if(NOT rows EQUAL 8)
  message(FATAL_ERROR "the fit has ${rows} tasks, expected the 7 GPU tasks and the weight sync")
endif()
math(EXPR last "${rows} - 1")
foreach(i RANGE ${last})
  string(JSON task GET "${profile}" fitted calibration tasks ${i} task)
  string(JSON row GET "${profile}" fitted calibration tasks ${i})
  string(JSON taken GET "${profile}" fitted calibration tasks ${i} measured_s)
  set(seconds "")
  foreach(k 0 1 2)
    string(JSON s GET "${measured}" tasks ${task} seconds ${k})
    list(APPEND seconds ${s})
  endforeach()
  # The median of three, compared as numbers (a string sort puts 0.22 before 0.138).
  list(GET seconds 0 x)
  list(GET seconds 1 y)
  list(GET seconds 2 z)
  set(middle ${y})
  if((x GREATER y AND x LESS z) OR (x LESS y AND x GREATER z))
    set(middle ${x})
  elseif((z GREATER x AND z LESS y) OR (z LESS x AND z GREATER y))
    set(middle ${z})
  endif()
  # The two files round to the same digits; compare the leading ones.
  string(SUBSTRING "${taken}" 0 7 a)
  string(SUBSTRING "${middle}" 0 7 b)
  if(NOT a STREQUAL b)
    message(FATAL_ERROR "${task}: the fit took ${taken} s, the report's median is ${middle} s (${seconds})")
  endif()
endforeach()

# hetrl-cluster adopts the fitted figures as the type's.
run(${CLUSTER} --from-profile ${fit} --node lab:2xL4 -o ${calibrated})
file(READ ${calibrated} cluster)
foreach(pair "pass_efficiency:training" "optimizer_efficiency:optimizer" "decode_step_overhead_ms:decode_step_overhead_ms"
        "copy_efficiency:copy" "prefill_efficiency:prefill")
  string(REPLACE ":" ";" keys ${pair})
  list(GET keys 0 from)
  list(GET keys 1 to)
  string(JSON fitted GET "${profile}" fitted ${from})
  string(JSON adopted GET "${cluster}" gpu_types L4 efficiency ${to})
  if(NOT fitted STREQUAL adopted)
    message(FATAL_ERROR "${from} ${fitted} became ${to} ${adopted}")
  endif()
endforeach()

# To standard output: the profile alone there (the table on stderr).
run(${EXEC} --cluster ${DATA}/exec_cluster.json --workload ${DATA}/exec_ppo.json --plan ${DATA}/plan_exec_ppo.json
    --layers 1 --hidden 64 --vocab 512 --backend cpu --warmup 0 --fit-profile -)
string(JSON schema ERROR_VARIABLE bad GET "${out}" schema)
string(STRIP "${out}" stripped)
string(FIND "${out}" "fitted on the measured tasks" table)
if(bad OR NOT schema STREQUAL "hetrl.profile/v2" OR NOT stripped MATCHES "}$" OR NOT table EQUAL -1)
  message(FATAL_ERROR "--fit-profile - wrote more than the profile to stdout (${bad}):\n${out}")
endif()
