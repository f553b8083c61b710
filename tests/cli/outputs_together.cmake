# A run's outputs are committed together: when one cannot be written (a device that is full),
# none of the others is left, nor a temporary file. "-" writes an output to standard output,
# and the tool's text then goes to standard error.
set(dir "${OUT}/outputs_together")
file(REMOVE_RECURSE "${dir}")
file(MAKE_DIRECTORY "${dir}")
set(inputs --cluster "${DATA}/valid.json" --workload "${DATA}/grpo_small.json")

include("${CMAKE_CURRENT_LIST_DIR}/run_in_dir.cmake")

function(require_empty_folder why)
  file(GLOB left "${dir}/*")
  if(left)
    message(FATAL_ERROR "${why}: left behind ${left}")
  endif()
endfunction()

if(EXISTS /dev/full)
  run(TOOL "${SIM}" EXIT 1 EXPECT "hetrl-sim: error: cannot write /dev/full: No space left on device"
      ARGS ${inputs} --plan "${DATA}/plan_hand.json" --iterations 1 --report report.json --trace /dev/full)
  if(NOT out STREQUAL "")
    message(FATAL_ERROR "a run whose trace failed printed its results: ${out}")
  endif()
  require_empty_folder("the trace could not be written, the report was")
  run(TOOL "${PLAN}" EXIT 1 EXPECT "hetrl-plan: error: cannot write /dev/full: No space left on device"
      ARGS --cluster "${DATA}/small3.json" --workload "${DATA}/grpo_tiny.json" --planner ilp
           --export-lp model.lp --export-mps model.mps -o /dev/full)
  require_empty_folder("the plan could not be written, the ILP's model was")
else()
  message(STATUS "no /dev/full here: the full-device cases are skipped")
endif()

# Standard output: the file alone there, parseable; the text on standard error.
run(TOOL "${PLAN}" EXIT 0 EXPECT "samples/s" ARGS ${inputs} -o -)
string(JSON schema GET "${out}" schema)
if(NOT schema STREQUAL "hetrl.plan/v1")
  message(FATAL_ERROR "-o - did not put the plan alone on standard output: ${out}")
endif()
file(WRITE "${dir}/plan.json" "${out}")
run(TOOL "${SIM}" EXIT 0 EXPECT "simulated 1 iteration" ARGS ${inputs} --plan plan.json --iterations 1 --report -)
string(JSON schema GET "${out}" schema)
if(NOT schema STREQUAL "hetrl.simreport/v1")
  message(FATAL_ERROR "--report - did not put the report alone on standard output: ${out}")
endif()
run(TOOL "${SIM}" EXIT 0 EXPECT "wrote 3 lengths"
    ARGS lengths --mean-tokens 100 --max-tokens 400 --count 3 -o -)
if(NOT out MATCHES "^response_tokens\n[0-9]+\n[0-9]+\n[0-9]+\n$")
  message(FATAL_ERROR "lengths -o - wrote: ${out}")
endif()
run(TOOL "${CLUSTER}" EXIT 0 ARGS --node us-east-1a:8xL4 -o -)
string(JSON schema GET "${out}" schema)
if(NOT schema STREQUAL "hetrl.cluster/v1")
  message(FATAL_ERROR "hetrl-cluster -o - wrote: ${out}")
endif()
run(TOOL "${PLAN}" EXIT 2 EXPECT "error: standard output .-. is given for two outputs"
    ARGS --cluster "${DATA}/small3.json" --workload "${DATA}/grpo_tiny.json" --planner ilp -o - --export-lp -)
file(REMOVE "${dir}/plan.json")
require_empty_folder("standard output runs")
