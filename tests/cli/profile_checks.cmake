# What the hetrl-profile chain scripts share (included by profile_chain.cmake and
# profile_mpi.cmake).

include(${CMAKE_CURRENT_LIST_DIR}/run_ok.cmake)

# Fails the test unless each named figure under the profile's "fitted" is positive.
function(require_fitted profile)
  foreach(figure ${ARGN})
    string(JSON value GET "${profile}" fitted ${figure})
    if(NOT value GREATER 0)
      message(FATAL_ERROR "fitted ${figure} is ${value}, expected a positive figure")
    endif()
  endforeach()
endfunction()

# Fails the test unless the cluster gives its `type` GPUs the profile's fitted `figure` as `key`
# (a path under gpu_types.<type>), as written.
function(require_adopted cluster profile type key figure)
  string(JSON adopted GET "${cluster}" gpu_types ${type} ${key})
  string(JSON measured GET "${profile}" fitted ${figure})
  if(NOT adopted STREQUAL measured)
    message(FATAL_ERROR "the cluster's ${type} ${key} is ${adopted}, the profile measured ${figure} ${measured}")
  endif()
endfunction()
