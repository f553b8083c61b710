# What the tests that set a tool's samples/s against planning alone share, included by
# plan_compare.cmake and plan_capacity.cmake.

# Fails, naming `what`, unless `precise` (samples/s as a JSON file holds them) rounds to the
# hundredths `printed` shows (as hetrl-plan prints them, planning alone).
function(check_same_hundredths printed precise what)
  string(REGEX REPLACE "^([0-9]+)\\.([0-9][0-9]).*" "\\1\\2" printed_hundredths "${printed}")
  string(REGEX MATCH "^([0-9]+)\\.([0-9]*)" parts "${precise}000")
  string(SUBSTRING "${CMAKE_MATCH_2}" 0 3 thousandths)
  math(EXPR rounded "(${CMAKE_MATCH_1}${thousandths} + 5) / 10")
  if(NOT rounded EQUAL printed_hundredths)
    message(FATAL_ERROR "${what}: ${precise} samples/s, planning alone ${printed}")
  endif()
endfunction()
