# The calibration chain on the CPU: hetrl-profile --backend cpu --quick writes a v2 profile;
# hetrl-cluster --from-profile turns it into a cluster whose one "GPU" is this CPU; hetrl-plan
# prices a workload on it; hetrl-profile show reads it back. Checks what each step wrote, not
# how fast the machine is.
#   PROFILE, CLUSTER, PLAN: the tools; DATA: tests/cli/data; OUT: a scratch folder.
include(${CMAKE_CURRENT_LIST_DIR}/profile_checks.cmake)

file(REMOVE ${OUT}/cpu_profile.json ${OUT}/cpu_cluster.json)
run(${PROFILE} --backend cpu --quick -o ${OUT}/cpu_profile.json)
file(READ ${OUT}/cpu_profile.json profile)
string(JSON schema GET "${profile}" schema)
string(JSON backend GET "${profile}" device backend)
string(JSON type GET "${profile}" gpu_type)
if(NOT schema STREQUAL "hetrl.profile/v2" OR NOT backend STREQUAL "cpu" OR NOT type MATCHES "^cpu-")
  message(FATAL_ERROR "unexpected profile header: ${schema}, ${backend}, ${type}")
endif()
require_fitted("${profile}" gemm_large_tflops gemm_small_tflops fp32_tflops memory_bandwidth_gb_per_s
               decode_attention_gb_per_s attention_tflops host_to_device_gb_per_s launch_overhead_us)
foreach(section gemm memory attention pass_attention)
  string(JSON count LENGTH "${profile}" measurements ${section})
  if(count LESS 2)  # the first two points of a curve are measured however slow the machine
    message(FATAL_ERROR "measurements/${section} has ${count} points, expected a curve")
  endif()
endforeach()
string(JSON points LENGTH "${profile}" fitted gemm_curve)
if(points LESS 2)
  message(FATAL_ERROR "the GEMM curve has ${points} points, expected at least 2 token counts")
endif()

# --quick measures three widths: each keeps its own curve, and the cluster adopts them.
string(JSON widths LENGTH "${profile}" fitted gemm_curves)
if(NOT widths EQUAL 3)
  message(FATAL_ERROR "the profile has ${widths} GEMM curves by width, expected 3 (512, 1024 and 4096)")
endif()

run(${CLUSTER} --from-profile ${OUT}/cpu_profile.json --node lab:1x${type} -o ${OUT}/cpu_cluster.json)
string(FIND "${out}" "${type}" at)
if(at EQUAL -1)
  message(FATAL_ERROR "the cluster table does not show ${type}:\n${out}")
endif()
file(READ ${OUT}/cpu_cluster.json cluster)
require_adopted("${cluster}" "${profile}" ${type} bf16_dense_tflops gemm_large_tflops)
# The pass attention's rate as its share of the type's peak (the large GEMMs' rate).
string(JSON attention GET "${cluster}" gpu_types ${type} efficiency attention)
if(NOT attention MATCHES "^(0\\.[0-9]*[1-9][0-9]*|[1-9](\\.[0-9]+)?e-[0-9]+)$")
  message(FATAL_ERROR "the cluster's ${type} has attention efficiency ${attention}, expected one in (0, 1)")
endif()
# Decode attention's FLOPs rate, measured at two group sizes, likewise.
string(JSON decode_attention GET "${cluster}" gpu_types ${type} efficiency decode_attention)
if(NOT decode_attention MATCHES "^(0\\.[0-9]*[1-9][0-9]*|[1-9](\\.[0-9]+)?e-[0-9]+)$")
  message(FATAL_ERROR "the cluster's ${type} has decode attention efficiency ${decode_attention}, expected one in (0, 1)")
endif()
string(JSON adopted_widths LENGTH "${cluster}" gpu_types ${type} efficiency gemm_curves)
if(NOT adopted_widths EQUAL 3)
  message(FATAL_ERROR "the cluster's ${type} has ${adopted_widths} GEMM curves by width, expected 3")
endif()

run(${PLAN} --cluster ${OUT}/cpu_cluster.json --workload ${DATA}/grpo_tiny.json)
foreach(piece "samples/s" "on ${type}" "actor_train")
  string(FIND "${out}" "${piece}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "the plan lacks \"${piece}\":\n${out}")
  endif()
endforeach()

run(${PROFILE} show ${OUT}/cpu_profile.json --compare L4)
foreach(piece "GEMM by tokens" "GEMM by width" "compared with the datasheet of L4" "memory read" "attention, pass"
              "decode attention (KV GB/s)" "decode attention (TFLOP/s)" "16 heads a KV"
              "pass attention (sequences x length)")
  string(FIND "${out}" "${piece}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "hetrl-profile show lacks \"${piece}\":\n${out}")
  endif()
endforeach()
