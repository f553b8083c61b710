# Outputs never replace inputs: each tool, given an output that is one of its inputs (by name,
# by another name, through a symbolic link) or one file for two outputs, exits 2 with one line
# and leaves the input as it was. An output through a link to a file not yet there writes that
# file and keeps the link; /dev/null is written in place.
set(dir "${OUT}/outputs_inputs")
file(REMOVE_RECURSE "${dir}")
file(MAKE_DIRECTORY "${dir}")
file(COPY "${DATA}/valid.json" "${DATA}/grpo_small.json" "${DATA}/plan_hand.json" "${DATA}/profile_a100.json"
     DESTINATION "${dir}")
file(CREATE_LINK valid.json "${dir}/cluster_link.json" SYMBOLIC)
file(CREATE_LINK new_plan.json "${dir}/dangling.json" SYMBOLIC)

include("${CMAKE_CURRENT_LIST_DIR}/run_in_dir.cmake")

foreach(f valid.json grpo_small.json plan_hand.json profile_a100.json)
  file(SHA256 "${dir}/${f}" before_${f})
endforeach()
set(inputs --cluster valid.json --workload grpo_small.json)
run(TOOL "${PLAN}" EXIT 2 EXPECT "valid.json is the input valid.json: an output never replaces an input"
    ARGS ${inputs} -o valid.json)
run(TOOL "${PLAN}" EXIT 2 EXPECT "./grpo_small.json is the input grpo_small.json"
    ARGS ${inputs} -o ./grpo_small.json)
run(TOOL "${PLAN}" EXIT 2 EXPECT "cluster_link.json is the input valid.json"
    ARGS ${inputs} -o cluster_link.json)
run(TOOL "${PLAN}" EXIT 2 EXPECT "plan_hand.json is the input plan_hand.json"
    ARGS evaluate ${inputs} --plan plan_hand.json -o plan_hand.json)
run(TOOL "${PLAN}" EXIT 2 EXPECT "out.lp is given for two outputs"
    ARGS ${inputs} --planner ilp -o out.lp --export-lp out.lp)
run(TOOL "${SIM}" EXIT 2 EXPECT "plan_hand.json is the input plan_hand.json"
    ARGS ${inputs} --plan plan_hand.json --report plan_hand.json)
run(TOOL "${CLUSTER}" EXIT 2 EXPECT "profile_a100.json is the input profile_a100.json"
    ARGS --preset-node us-east-1a:1xp4de.24xlarge --from-profile profile_a100.json -o profile_a100.json)
foreach(f valid.json grpo_small.json plan_hand.json profile_a100.json)
  file(SHA256 "${dir}/${f}" after)
  if(NOT after STREQUAL before_${f})
    message(FATAL_ERROR "${f} changed: an output replaced an input")
  endif()
endforeach()
if(NOT IS_SYMLINK "${dir}/cluster_link.json")
  message(FATAL_ERROR "cluster_link.json is no longer a link")
endif()

# Through a link to a file not yet there: the file is written, the link stays.
run(TOOL "${PLAN}" EXIT 0 ARGS ${inputs} -o dangling.json)
if(NOT IS_SYMLINK "${dir}/dangling.json" OR NOT EXISTS "${dir}/new_plan.json")
  message(FATAL_ERROR "-o through a link replaced the link instead of writing the file it names")
endif()
file(READ "${dir}/new_plan.json" plan)
string(JSON schema GET "${plan}" schema)
if(NOT schema STREQUAL "hetrl.plan/v1")
  message(FATAL_ERROR "the file the link names holds no plan: ${schema}")
endif()
# A device is written in place (as root a file would have replaced it).
run(TOOL "${PLAN}" EXIT 0 ARGS ${inputs} -o /dev/null)
if(NOT EXISTS /dev/null OR IS_DIRECTORY /dev/null)
  message(FATAL_ERROR "/dev/null is gone")
endif()
file(GLOB left "/dev/null.tmp*")
if(left)
  message(FATAL_ERROR "a temporary file was made beside /dev/null: ${left}")
endif()
