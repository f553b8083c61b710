# OpenBLAS's kernels on the cpu backend: where the CPU has AVX2 and FMA, the run's device does
# not use OpenBLAS's generic x86-64 kernels ("Prescott"), which it falls back to for a CPU
# model it does not know; kernels the user names in OPENBLAS_CORETYPE are used as named, and
# the profile says so. The device's runtime is read from the profile hetrl-exec --fit-profile
# writes of a one-layer run.
#   EXEC: the tool; DATA: tests/cli/data; OUT: a scratch folder.
include(${CMAKE_CURRENT_LIST_DIR}/run_ok.cmake)

function(runtime_of variable)
  set(fit ${OUT}/blas_kernels_fit.json)
  file(REMOVE ${fit})
  run(${CMAKE_COMMAND} -E env ${ARGN} ${EXEC} --cluster ${DATA}/exec_cluster.json --workload ${DATA}/exec_ppo.json
      --plan ${DATA}/plan_exec_ppo.json --layers 1 --hidden 64 --vocab 512 --backend cpu --iterations 1
      --fit-profile ${fit})
  file(READ ${fit} profile)
  string(JSON runtime GET "${profile}" device runtime)
  set(${variable} "${runtime}" PARENT_SCOPE)
endfunction()

runtime_of(chosen --unset=OPENBLAS_CORETYPE)
if(NOT chosen MATCHES "^OpenBLAS ")
  message(FATAL_ERROR "the device's runtime is \"${chosen}\", expected OpenBLAS's configuration")
endif()
set(flags "")
if(EXISTS /proc/cpuinfo)
  file(STRINGS /proc/cpuinfo flags REGEX "^flags" LIMIT_COUNT 1)
endif()
if(flags MATCHES " avx2( |$)" AND flags MATCHES " fma( |$)" AND chosen MATCHES " Prescott ")
  message(FATAL_ERROR "the CPU has AVX2 and FMA, the run used OpenBLAS's generic kernels: ${chosen}")
endif()

runtime_of(forced OPENBLAS_CORETYPE=Prescott)
if(NOT forced MATCHES " Prescott .*\\(OPENBLAS_CORETYPE=Prescott\\)$")
  message(FATAL_ERROR "OPENBLAS_CORETYPE=Prescott, the device's runtime is \"${forced}\"")
endif()
