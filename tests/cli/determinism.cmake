# The same inputs and settings give the same bytes: plans across runs and across the ILP's
# --threads 1 and 2 (planning_seconds aside), hybrid with a second seed, the simulator's report
# and trace with a second seed; and the seeds are used (another seed, another report).
include("${CMAKE_CURRENT_LIST_DIR}/run_in_dir.cmake")
set(dir "${DATA}")
set(inputs --cluster valid.json --workload grpo_small.json)

# A plan file without its planning_seconds, which must be there.
function(read_plan path var)
  file(READ "${path}" text)
  string(FIND "${text}" "\"planning_seconds\"" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "${path} does not record planning_seconds")
  endif()
  string(REGEX REPLACE "\"planning_seconds\": [0-9.e+-]+" "" text "${text}")
  set(${var} "${text}" PARENT_SCOPE)
endfunction()

function(same a b what)
  if(NOT "${a}" STREQUAL "${b}")
    message(FATAL_ERROR "${what}: the files differ")
  endif()
endfunction()

foreach(threads 1 2)
  run(TOOL "${PLAN}" EXIT 0 ARGS ${inputs} --planner ilp --threads ${threads} -o "${OUT}/det_ilp_${threads}.json")
endforeach()
read_plan("${OUT}/det_ilp_1.json" one)
read_plan("${OUT}/det_ilp_2.json" two)
same("${one}" "${two}" "ilp with --threads 1 and 2")

foreach(i 1 2)
  run(TOOL "${PLAN}" EXIT 0 ARGS ${inputs} --seed 2 -o "${OUT}/det_hybrid_${i}.json")
endforeach()
read_plan("${OUT}/det_hybrid_1.json" one)
read_plan("${OUT}/det_hybrid_2.json" two)
same("${one}" "${two}" "hybrid --seed 2 twice")

foreach(run_seed 2a:2 2b:2 1:1)
  string(REPLACE ":" ";" parts "${run_seed}")
  list(GET parts 0 name)
  list(GET parts 1 seed)
  run(TOOL "${SIM}" EXIT 0 ARGS ${inputs} --plan plan_hand.json --iterations 3 --seed ${seed}
      --report "${OUT}/det_report_${name}.json" --trace "${OUT}/det_trace_${name}.json")
endforeach()
foreach(kind report trace)
  file(READ "${OUT}/det_${kind}_2a.json" a)
  file(READ "${OUT}/det_${kind}_2b.json" b)
  same("${a}" "${b}" "hetrl-sim --seed 2 ${kind}, twice")
  file(READ "${OUT}/det_${kind}_1.json" c)
  if("${a}" STREQUAL "${c}")
    message(FATAL_ERROR "hetrl-sim: the ${kind} with --seed 1 is the one with --seed 2: the seed is not used")
  endif()
endforeach()
