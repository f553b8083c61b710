# hetrl-exec across processes (mpirun, a process a plan GPU, the cpu backend and MPI): a plan
# whose generation spans two GPUs (TP 2) and whose actor trains on two (data parallel) gives
# the same tokens, scores, decode steps and gradient norms run by 2 processes as by one, and so
# does one whose actor trains at TP 2 over both; a plan of two groups on
# 4 GPUs (TP 2 generation in one, scoring and training in the other, the weight sync between
# them) runs by 4 as by one, sync and async, and so do one with the actor's scoring beside
# generation, PPO over three groups, plans of pipeline stages over 2 and 4 processes, and ZeRO-3
# training over 2 and 4 (replicas of uneven micro-batches, idle passes); a run of
# another process count than the plan's GPUs says so, and a process that hangs ends the run
# after --stall-timeout.
#   EXEC, MPIEXEC: the tool and mpirun; DATA: tests/cli/data; OUT: a scratch folder.
cmake_minimum_required(VERSION 3.20)  # quoted words in if() are words (CMP0054)
include(${CMAKE_CURRENT_LIST_DIR}/run_ok.cmake)

set(MPI ${MPIEXEC} --oversubscribe -n)
set(SCALE --layers 1 --hidden 128 --vocab 512 --backend cpu --iterations 2 --seed 5 --dtype fp32)
set(TP2 --cluster ${DATA}/exec_cluster.json --workload ${DATA}/exec_grpo.json --plan ${DATA}/plan_exec_tp2.json)
file(REMOVE ${OUT}/exec_one.json ${OUT}/exec_two.json)
run(${EXEC} ${TP2} ${SCALE} --report ${OUT}/exec_one.json)
run(${MPI} 2 ${EXEC} ${TP2} ${SCALE} --report ${OUT}/exec_two.json)
string(FIND "${out}" "2 processes" at)
if(at EQUAL -1)
  message(FATAL_ERROR "the 2-process run does not say so:\n${out}")
endif()
# Each process's device memory at its most, next to the cost model's need of its plan GPU
# (within a factor of two: the tiny model's weights, Adam state, activations and KV cache); one
# process gives its own peak and no need (its device runs both plan GPUs' replicas).
file(READ ${OUT}/exec_two.json two)
string(JSON devices LENGTH "${two}" devices)
if(NOT devices EQUAL 2)
  message(FATAL_ERROR "the 2-process report lists ${devices} devices, not 2")
endif()
foreach(d 0 1)
  string(JSON peak GET "${two}" devices ${d} peak_bytes)
  string(JSON need GET "${two}" devices ${d} predicted_bytes)
  math(EXPR high "2 * ${need}")
  math(EXPR low "${need} / 2")
  if(peak LESS low OR peak GREATER high)
    message(FATAL_ERROR "process ${d}: a peak of ${peak} bytes against the model's ${need}")
  endif()
endforeach()
file(READ ${OUT}/exec_one.json one)
string(JSON devices LENGTH "${one}" devices)
string(JSON peak GET "${one}" devices 0 peak_bytes)
string(JSON need ERROR_VARIABLE none GET "${one}" devices 0 predicted_bytes)
if(NOT devices EQUAL 1 OR NOT peak GREATER 0 OR none STREQUAL "NOTFOUND")
  message(FATAL_ERROR "one process's report: ${devices} devices, a peak of ${peak} bytes, a need of ${need}")
endif()
# A number as an integer of 15 significant decimals, for CMake's integer arithmetic.
function(fixed value out)
  if(NOT value MATCHES "^([0-9]+)\\.?([0-9]*)$")
    message(FATAL_ERROR "expected a non-negative decimal number, found ${value}")
  endif()
  string(REGEX REPLACE "^0+" "" digits "${CMAKE_MATCH_1}${CMAKE_MATCH_2}000000000000000")
  string(SUBSTRING "${digits}" 0 15 digits)
  set(${out} "${digits}" PARENT_SCOPE)
endfunction()
# Two reports of one plan and seed agree: the tokens generated, decode steps and scores of
# each iteration equal, and the gradient norms within 10^9 in their first 15 significant digits
# (a relative 1e-6 to 1e-5, by the leading digit).
function(same_run one_file two_file what)
  file(READ ${one_file} one)
  file(READ ${two_file} two)
  string(JSON iterations LENGTH "${one}" iteration_stats)
  string(JSON also LENGTH "${two}" iteration_stats)
  if(NOT iterations EQUAL also OR iterations LESS 2)
    message(FATAL_ERROR "${what}: ${iterations} iterations in one process, ${also} in more")
  endif()
  math(EXPR last "${iterations} - 1")
  foreach(i RANGE ${last})
    foreach(field mean_score decode_steps)
      string(JSON a GET "${one}" iteration_stats ${i} ${field})
      string(JSON b GET "${two}" iteration_stats ${i} ${field})
      if(NOT a STREQUAL b)
        message(FATAL_ERROR "${what}, iteration ${i} ${field}: ${a} in one process, ${b} in more")
      endif()
    endforeach()
    string(JSON a GET "${one}" tasks generate tokens ${i})
    string(JSON b GET "${two}" tasks generate tokens ${i})
    if(NOT a STREQUAL b)
      message(FATAL_ERROR "${what}, iteration ${i}: ${a} tokens generated in one process, ${b} in more")
    endif()
    string(JSON a GET "${one}" iteration_stats ${i} policy_grad_norm)
    string(JSON b GET "${two}" iteration_stats ${i} policy_grad_norm)
    string(REGEX MATCH "^[0-9]+" whole_a "${a}")
    string(REGEX MATCH "^[0-9]+" whole_b "${b}")
    fixed("${a}" x)
    fixed("${b}" y)
    math(EXPR gap "${x} - ${y}")
    if(gap LESS 0)
      math(EXPR gap "0 - ${gap}")
    endif()
    if(NOT whole_a STREQUAL whole_b OR NOT a GREATER 0 OR gap GREATER 1000000000)
      message(FATAL_ERROR "${what}, iteration ${i}'s gradient norm: ${a} in one process, ${b} in more")
    endif()
  endforeach()
endfunction()
same_run(${OUT}/exec_one.json ${OUT}/exec_two.json "TP 2 generation")
# Runs hetrl-exec with ARGN alone (OUT/NAME_one.json) and under mpirun over `processes`
# (OUT/NAME_many.json), and checks that the two are the same run (`what` names it).
function(alone_and_over name processes what)
  file(REMOVE ${OUT}/${name}_one.json ${OUT}/${name}_many.json)
  run(${EXEC} ${ARGN} --report ${OUT}/${name}_one.json)
  run(${MPI} ${processes} ${EXEC} ${ARGN} --report ${OUT}/${name}_many.json)
  same_run(${OUT}/${name}_one.json ${OUT}/${name}_many.json "${what}")
endfunction()
file(READ ${OUT}/exec_two.json two)
string(JSON replicas LENGTH "${two}" tasks actor_train replica_seconds 0)
string(JSON second GET "${two}" tasks actor_train replica_seconds 0 1)
if(NOT replicas EQUAL 2 OR NOT second GREATER 0)
  message(FATAL_ERROR "2 processes: actor_train has ${replicas} replicas, the second measured ${second} s")
endif()
# Where the data-parallel training's time went: its passes and step in both runs, the
# gradients' sync only between processes (one process sums the replicas' gradients in place;
# under this plan's ZeRO-3 the passes reduce-scatter them, and the sync's part is the weights'
# gather after the last step).
file(READ ${OUT}/exec_one.json one)
foreach(run one two)
  foreach(part passes replica_wait gradient_reduce optimizer_step)
    string(JSON n LENGTH "${${run}}" tasks actor_train parts ${part} seconds)
    string(JSON predicted GET "${${run}}" tasks actor_train parts ${part} predicted_seconds)
    if(NOT n EQUAL 2 OR predicted LESS 0)
      message(FATAL_ERROR "${run}: actor_train's ${part}: ${n} iterations, predicted ${predicted}")
    endif()
  endforeach()
  string(JSON passes GET "${${run}}" tasks actor_train parts passes seconds 0)
  string(JSON step GET "${${run}}" tasks actor_train parts optimizer_step seconds 0)
  string(JSON reduce GET "${${run}}" tasks actor_train parts gradient_reduce seconds 0)
  if(NOT passes GREATER 0 OR NOT step GREATER 0 OR (run STREQUAL "one" AND NOT reduce EQUAL 0) OR
     (run STREQUAL "two" AND NOT reduce GREATER 0))
    message(FATAL_ERROR "${run}: actor_train's passes ${passes} s, step ${step} s, gradient all-reduce ${reduce} s")
  endif()
  # Generation's: its prefill and its decode steps, together its slowest replica's seconds.
  foreach(part prefill decode)
    string(JSON n LENGTH "${${run}}" tasks generate parts ${part} seconds)
    string(JSON predicted GET "${${run}}" tasks generate parts ${part} predicted_seconds)
    string(JSON measured GET "${${run}}" tasks generate parts ${part} seconds 0)
    if(NOT n EQUAL 2 OR NOT predicted GREATER 0 OR NOT measured GREATER 0)
      message(FATAL_ERROR "${run}: generate's ${part}: ${n} iterations, predicted ${predicted} s, measured ${measured} s")
    endif()
  endforeach()
  string(JSON prefill GET "${${run}}" tasks generate parts prefill seconds 0)
  string(JSON whole GET "${${run}}" tasks generate seconds 0)
  if(NOT prefill LESS whole)
    message(FATAL_ERROR "${run}: generate's prefill ${prefill} s of ${whole} s")
  endif()
endforeach()
# The decode steps' TP all-reduces, timed between the processes (MPI's return when done): two
# a layer each step, the replica's every step; none in one process, whose shards take turns.
string(JSON kind ERROR_VARIABLE absent TYPE "${one}" tasks generate parts decode_all_reduce)
if(NOT absent)
  message(FATAL_ERROR "one process: generate has a decode all-reduce part (${kind}); it has no all-reduce to time")
endif()
foreach(i 0 1)
  string(JSON steps GET "${two}" iteration_stats ${i} decode_steps)
  string(JSON calls GET "${two}" tasks generate parts decode_all_reduce calls ${i})
  string(JSON seconds GET "${two}" tasks generate parts decode_all_reduce seconds ${i})
  string(JSON decode GET "${two}" tasks generate parts decode seconds ${i})
  math(EXPR expected "2 * 1 * ${steps}")
  if(NOT calls EQUAL expected OR NOT seconds GREATER 0 OR NOT seconds LESS decode)
    message(FATAL_ERROR "2 processes, iteration ${i}: ${calls} decode all-reduces in ${steps} steps of 1 layer "
                        "(${expected} expected), ${seconds} s of the decode's ${decode} s")
  endif()
endforeach()
# A fit over processes takes them as the type's decode all-reduce: their seconds over their
# count, pooled with an earlier run's report (--fit-on reads its counts).
file(REMOVE ${OUT}/exec_fit_tp2.json ${OUT}/exec_fit_tp2_report.json)
run(${MPI} 2 ${EXEC} ${TP2} ${SCALE} --report ${OUT}/exec_fit_tp2_report.json --fit-profile ${OUT}/exec_fit_tp2.json
    --fit-on ${OUT}/exec_two.json)
file(READ ${OUT}/exec_fit_tp2_report.json fitted_report)
set(pooled 0)
foreach(report two fitted_report)
  foreach(i 0 1)
    string(JSON calls GET "${${report}}" tasks generate parts decode_all_reduce calls ${i})
    math(EXPR pooled "${pooled} + ${calls}")
  endforeach()
endforeach()
string(FIND "${out}" "(measured: ${pooled} of them)" said)
file(READ ${OUT}/exec_fit_tp2.json profile)
string(JSON figure GET "${profile}" fitted decode_allreduce_ms)
if(said EQUAL -1 OR NOT figure GREATER 0)
  message(FATAL_ERROR "the fit over processes: ${figure} ms a decode all-reduce, expected over ${pooled}:\n${out}")
endif()

# Training at TP 2 over the two processes, generation and scoring as two replicas of one GPU;
# the full width of the model (its 2 kv heads split).
set(TRAIN2 --cluster ${DATA}/exec_cluster.json --workload ${DATA}/exec_grpo.json --plan ${DATA}/plan_exec_train_tp2.json
    --layers 1 --hidden 896 --vocab 512 --backend cpu --iterations 2 --seed 5 --dtype fp32)
alone_and_over(exec_train 2 "TP 2 training" ${TRAIN2})
# Its passes' TP all-reduces, timed between the processes: four a layer each micro-batch (two
# in the forward, two in the backward), a part of the passes; none in one process, and none
# for the scoring replicas of TP 1.
file(READ ${OUT}/exec_train_one.json train_one)
file(READ ${OUT}/exec_train_many.json train_two)
string(JSON kind ERROR_VARIABLE absent TYPE "${train_one}" tasks actor_train parts tp_all_reduce)
if(NOT absent)
  message(FATAL_ERROR "one process: actor_train has a TP all-reduce part (${kind}); it has no all-reduce to time")
endif()
string(JSON kind ERROR_VARIABLE absent TYPE "${train_two}" tasks ref_logprob parts)
if(NOT absent)
  message(FATAL_ERROR "2 processes: ref_logprob at TP 1 has parts (${kind})")
endif()
string(JSON predicted GET "${train_two}" tasks actor_train parts tp_all_reduce predicted_seconds)
foreach(i 0 1)
  string(JSON calls GET "${train_two}" tasks actor_train parts tp_all_reduce calls ${i})
  string(JSON seconds GET "${train_two}" tasks actor_train parts tp_all_reduce seconds ${i})
  string(JSON passes GET "${train_two}" tasks actor_train parts passes seconds ${i})
  math(EXPR rest "${calls} % 4")
  if(NOT calls GREATER 0 OR NOT rest EQUAL 0 OR NOT seconds GREATER 0 OR NOT seconds LESS passes OR
     NOT predicted GREATER 0)
    message(FATAL_ERROR "2 processes, iteration ${i}: ${calls} TP all-reduces in the passes of 1 layer (4 a "
                        "micro-batch expected), ${seconds} s of the passes' ${passes} s, predicted ${predicted} s")
  endif()
endforeach()
# A fit on them gives the type's TP wait.
file(REMOVE ${OUT}/exec_fit_train_tp2.json)
run(${MPI} 2 ${EXEC} ${TRAIN2} --fit-profile ${OUT}/exec_fit_train_tp2.json)
file(READ ${OUT}/exec_fit_train_tp2.json profile)
string(JSON figure ERROR_VARIABLE missing GET "${profile}" fitted tp_wait)
string(FIND "${out}" "of the passes' compute (on the TP all-reduces of 1 scoring or training task)" said)
if(missing OR said EQUAL -1)
  message(FATAL_ERROR "the fit on TP 2 training: TP wait ${figure} (${missing}):\n${out}")
endif()

# The two groups at a learning rate that moves the weights far in a step, so that the second
# iteration's tokens tell whether each of generation's shards took the trained weights from
# the other group's processes whole and in place: the same run as in one process.
set(GROUPS --cluster ${DATA}/exec_cluster4.json --workload ${DATA}/exec_grpo.json --plan ${DATA}/plan_exec_groups.json
    ${SCALE} --learning-rate 0.01)
alone_and_over(exec_groups 4 "two groups and the weight sync" ${GROUPS})
file(READ ${OUT}/exec_groups_many.json four)
string(JSON generators LENGTH "${four}" tasks generate replica_seconds 1)
string(JSON trainers LENGTH "${four}" tasks actor_train replica_seconds 1)
string(JSON score GET "${four}" iteration_stats 1 mean_score)
if(NOT generators EQUAL 1 OR NOT trainers EQUAL 2 OR NOT score GREATER 0)
  message(FATAL_ERROR "4 processes: ${generators} generation and ${trainers} training replicas, score ${score}")
endif()

# The actor's scoring in generation's group instead: the trained weights reach it from the
# training's group, posted when the training ends, and its log-probs go back the other way.
set(SCORING --cluster ${DATA}/exec_cluster4.json --workload ${DATA}/exec_grpo.json
    --plan ${DATA}/plan_exec_groups_scoring.json ${SCALE} --learning-rate 0.01)
alone_and_over(exec_scoring 4 "the actor's scoring beside generation" ${SCORING})

# PPO over three groups on 4 processes (generation and the actor's scoring; the reference,
# the critic's values and the reward model; both trainings), sync and async: every sample's
# fields cross from the group that wrote them to the groups that read them, the advantages
# computed in the training's group, the critic's weights to the group that scores with them.
set(PPO3 --cluster ${DATA}/exec_cluster4.json --plan ${DATA}/plan_exec_ppo_groups.json --layers 1 --hidden 128
    --vocab 512 --backend cpu --iterations 3 --warmup 0 --seed 5 --dtype fp32 --learning-rate 0.01)
alone_and_over(exec_ppo3 4 "PPO over three groups" ${PPO3} --workload ${DATA}/exec_ppo.json)
alone_and_over(exec_ppo3_async 4 "async PPO over three groups" ${PPO3} --workload ${DATA}/exec_ppo_async.json)
# The same plan in bf16 (the cost model's weights): each process's memory at its peak by purpose
# adds up to the peak; on processes 1 to 3 the weights, gradients and optimizer state there are
# the cost model's need of its plan GPU (within 2%: norms and biases), so that no process holds
# a copy of a trained role that no task of its reads (the scoring group's reads its copy; the
# training group, whose tasks all run in the training's layout, keeps none) and the gradients
# are held in fp32. (Process 0 holds the actor twice, generation's engine and the scoring's
# copy, where the cost model lets an untrained role's two share one.)
file(REMOVE ${OUT}/exec_ppo3_bf16.json)
run(${MPI} 4 ${EXEC} --cluster ${DATA}/exec_cluster4.json --plan ${DATA}/plan_exec_ppo_groups.json --layers 1
    --hidden 128 --vocab 512 --backend cpu --iterations 1 --warmup 0 --seed 5 --workload ${DATA}/exec_ppo.json
    --report ${OUT}/exec_ppo3_bf16.json)
file(READ ${OUT}/exec_ppo3_bf16.json bf16)
foreach(d 0 1 2 3)
  string(JSON peak GET "${bf16}" devices ${d} peak_bytes)
  set(sum 0)
  foreach(purpose weights gradients optimizer activations kv_cache workspace communication other)
    string(JSON bytes GET "${bf16}" devices ${d} peak_by_purpose ${purpose})
    math(EXPR sum "${sum} + ${bytes}")
  endforeach()
  if(NOT sum EQUAL peak)
    message(FATAL_ERROR "process ${d}: its peak of ${peak} bytes, by purpose ${sum}")
  endif()
endforeach()
foreach(d 1 2 3)
  foreach(purpose weights gradients optimizer)
    string(JSON held GET "${bf16}" devices ${d} peak_by_purpose ${purpose})
    string(JSON need GET "${bf16}" devices ${d} predicted_by_purpose ${purpose})
    math(EXPR high "${need} + ${need} / 50")
    math(EXPR low "${need} - ${need} / 50")
    if(held LESS low OR held GREATER high)
      message(FATAL_ERROR "process ${d}: ${purpose} of ${held} bytes at its peak, the cost model's need ${need}")
    endif()
  endforeach()
endforeach()
string(JSON trained GET "${bf16}" devices 2 peak_by_purpose gradients)
if(NOT trained GREATER 0)
  message(FATAL_ERROR "process 2 (both trainings): no gradients at its peak")
endif()

# Async with a staleness bound of 1, generation in a group of its own: it runs an iteration
# ahead of training, so the weight sync of iteration i takes the weights trained in i - 2 (in
# the first iteration the initial weights, as in a synchronous run; none in the second), in one
# process as in four. The first iteration is the synchronous run's; the second generates with
# the first weights where the synchronous run has trained them once.
set(ASYNC --cluster ${DATA}/exec_cluster4.json --plan ${DATA}/plan_exec_groups.json --layers 1 --hidden 128 --vocab 512
    --backend cpu --iterations 3 --warmup 0 --seed 5 --dtype fp32 --learning-rate 0.01)
alone_and_over(exec_async 4 "async over two groups" ${ASYNC} --workload ${DATA}/exec_grpo_async.json)
file(REMOVE ${OUT}/exec_sync3.json)
run(${MPI} 4 ${EXEC} ${ASYNC} --workload ${DATA}/exec_grpo.json --report ${OUT}/exec_sync3.json)
file(READ ${OUT}/exec_async_many.json async)
file(READ ${OUT}/exec_sync3.json sync)
file(READ ${OUT}/exec_async_one.json alone)  # async in one process
foreach(mode async alone sync)
  foreach(i 0 1 2)
    string(JSON seconds${i} GET "${${mode}}" tasks weight_sync seconds ${i})
    string(JSON period GET "${${mode}}" iterations_as_run ${i} period_seconds)
    string(JSON end GET "${${mode}}" iterations_as_run ${i} end_seconds)
    string(JSON start GET "${${mode}}" iterations_as_run ${i} start_seconds)
    if(NOT period GREATER 0 OR NOT end GREATER start)
      message(FATAL_ERROR "${mode}, iteration ${i}: from ${start} s to ${end} s, period ${period} s")
    endif()
  endforeach()
  set(taken "${seconds0} ${seconds1} ${seconds2}")
  if(NOT seconds0 GREATER 0 OR NOT seconds2 GREATER 0 OR (NOT mode STREQUAL "sync" AND NOT seconds1 EQUAL 0) OR
     (mode STREQUAL "sync" AND NOT seconds1 GREATER 0))
    message(FATAL_ERROR "${mode}: the weight sync's seconds ${taken}")
  endif()
endforeach()
string(JSON a GET "${async}" iteration_stats 0 mean_score)
string(JSON b GET "${sync}" iteration_stats 0 mean_score)
if(NOT a STREQUAL b)
  message(FATAL_ERROR "the first iteration's score: ${a} async, ${b} sync")
endif()
string(JSON a GET "${async}" iteration_stats 1 mean_score)
string(JSON b GET "${sync}" iteration_stats 1 mean_score)
if(a STREQUAL b)
  message(FATAL_ERROR "the second iteration's score: ${a} async and sync; async generates with the first weights")
endif()

# Pipeline stages over the two processes: generation, the actor's scoring and its training
# each one replica of two stages (the scoring's split 2:1 of the plan's layers, so 1 and 1 of
# the scaled model's 2; generation's stages the other way round from training's, so that the
# weight sync sends each layer to the other process), the reference as two replicas; the
# model's tied embedding on both ends of the training's pipeline. The same run as in one
# process, where the stages run as one model.
set(PP2 --cluster ${DATA}/exec_cluster.json --workload ${DATA}/exec_grpo.json --plan ${DATA}/plan_exec_pp2.json
    --layers 2 --hidden 128 --vocab 512 --backend cpu --iterations 2 --seed 5 --dtype fp32 --learning-rate 0.01)
alone_and_over(exec_pp 2 "pipeline stages over processes" ${PP2})
file(READ ${OUT}/exec_pp_many.json two)
foreach(task generate actor_logprob actor_train)
  string(JSON replicas LENGTH "${two}" tasks ${task} replica_seconds 0)
  string(JSON seconds GET "${two}" tasks ${task} replica_seconds 0 0)
  if(NOT replicas EQUAL 1 OR NOT seconds GREATER 0)
    message(FATAL_ERROR "pipeline stages: ${task} has ${replicas} replicas, measured ${seconds} s")
  endif()
endforeach()

# Four processes: generation at TP 2 in each of two stages (its first stage on the last two
# processes), the actor's scoring as two replicas of two stages, its training as two
# data-parallel replicas of two stages with ZeRO's sharded optimiser over each stage's pair.
set(PP4 --cluster ${DATA}/exec_cluster4.json --workload ${DATA}/exec_grpo.json --plan ${DATA}/plan_exec_pp4.json
    --layers 2 --hidden 128 --vocab 512 --backend cpu --iterations 2 --seed 5 --dtype fp32 --learning-rate 0.01)
alone_and_over(exec_pp4 4 "tensor, pipeline and data parallel over 4 processes" ${PP4})

# Four stages over four processes, one layer each: 1F1B's first stage runs three forwards
# before its first backward, the middle stages exchange rows and gradients with both
# neighbours (generation's stages in the other order, so the sync sends each layer across).
set(STAGES4 --cluster ${DATA}/exec_cluster4.json --workload ${DATA}/exec_grpo.json --plan ${DATA}/plan_exec_pp4_stages.json
    --layers 4 --hidden 128 --vocab 512 --backend cpu --iterations 2 --seed 5 --dtype fp32 --learning-rate 0.01)
alone_and_over(exec_stages4 4 "four pipeline stages over 4 processes" ${STAGES4})

# ZeRO-3 over processes (the weights sharded between passes, each layer gathered in them, its
# gradients reduce-scattered): the actor's training as two data-parallel replicas taking 3/4
# and 1/4 of the samples in micro-batches of 64 tokens, so the second runs idle passes beside
# the first's extra micro-batches; over 2 processes, and over 4 as two replicas of two stages
# (the tied embedding's gradient summed between the first and last stages' shards; the first
# replica's first stage on the second process and its last on the third, the second's on the
# first and the fourth, so that the stages' groups meet the replicas in different orders).
set(ZERO3 --cluster ${DATA}/exec_cluster.json --workload ${DATA}/exec_grpo_micro.json --plan ${DATA}/plan_exec_zero3.json
    --layers 2 --hidden 128 --vocab 512 --backend cpu --iterations 2 --seed 5 --dtype fp32 --learning-rate 0.01)
alone_and_over(exec_zero3 2 "ZeRO-3 over 2 processes" ${ZERO3})
set(ZERO3_PP4 --cluster ${DATA}/exec_cluster4.json --workload ${DATA}/exec_grpo_micro.json
    --plan ${DATA}/plan_exec_pp4_zero3.json --layers 2 --hidden 128 --vocab 512 --backend cpu --iterations 2 --seed 5
    --dtype fp32 --learning-rate 0.01)
alone_and_over(exec_zero3_pp4 4 "ZeRO-3 over two stages' pairs of processes" ${ZERO3_PP4})
# And over two replicas of TP 2: each shard's pair of processes, one in each replica, is a
# data-parallel group of its own, sharding that shard's units (hidden 896, so that the kv heads
# split, and one layer; the default learning rate: at 0.01 AdamW's first step turns the sums'
# last digits, which the order of the replicas' sum sets, into a second iteration's gradient
# norm 1e-4 apart, at ZeRO 0 and 1 as at 3).
set(ZERO3_TP2 --cluster ${DATA}/exec_cluster4.json --workload ${DATA}/exec_grpo_micro.json
    --plan ${DATA}/plan_exec_tp2_zero3.json --layers 1 --hidden 896 --vocab 512 --backend cpu --iterations 2 --seed 5
    --dtype fp32)
alone_and_over(exec_zero3_tp2 4 "ZeRO-3 over two TP-2 replicas' processes" ${ZERO3_TP2})
# The gathers' time, a part of the passes' under mpirun (on MPI, whose collectives return when
# done), none in one process, whose replicas share whole weights.
foreach(name exec_zero3 exec_zero3_pp4 exec_zero3_tp2)
  file(READ ${OUT}/${name}_many.json many)
  string(JSON passes GET "${many}" tasks actor_train parts passes seconds 0)
  string(JSON gathers GET "${many}" tasks actor_train parts weight_gathers seconds 0)
  if(NOT gathers GREATER 0 OR NOT passes GREATER gathers)
    message(FATAL_ERROR "${name}: ZeRO-3's gathers ${gathers} s of passes of ${passes} s")
  endif()
  file(READ ${OUT}/${name}_one.json one)
  string(JSON found ERROR_VARIABLE none GET "${one}" tasks actor_train parts weight_gathers)
  if(NOT none)
    message(FATAL_ERROR "${name}: one process reports ZeRO-3 gathers: ${found}")
  endif()
endforeach()

# A run that must fail: exit `EXIT` (any but 0 without it), `TEXT` in one error line, and no
# report at `REPORT` where one is named.
function(fails what)
  cmake_parse_arguments(F "" "EXIT;TEXT;REPORT" "COMMAND" ${ARGN})
  if(F_REPORT)
    file(REMOVE ${F_REPORT})
  endif()
  execute_process(COMMAND ${F_COMMAND} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  string(FIND "${err}" "${F_TEXT}" at)
  string(REGEX MATCHALL "hetrl-exec: error" lines "${err}")
  list(LENGTH lines said)
  if(rc EQUAL 0 OR (F_EXIT AND NOT rc EQUAL F_EXIT) OR at EQUAL -1 OR NOT said EQUAL 1 OR
     (F_REPORT AND EXISTS ${F_REPORT}))
    message(FATAL_ERROR "${what}: exit ${rc}, ${said} error lines\n${err}")
  endif()
endfunction()

# Training replicas split into other stages would hold other layers' weights on each end of
# the data-parallel sum: the job is not done here.
fails("training replicas of other stages" EXIT 1 REPORT ${OUT}/exec_uneven.json
      TEXT "task actor_train: replicas of stages of 1+1 and 2 layers; hetrl-exec trains one layout of a model over processes"
      COMMAND ${MPI} 4 ${EXEC} --cluster ${DATA}/exec_cluster4.json --workload ${DATA}/exec_grpo.json
              --plan ${DATA}/plan_exec_pp_uneven.json --layers 2 --hidden 128 --vocab 512 --backend cpu
              --report ${OUT}/exec_uneven.json)

# Three processes for a plan of two GPUs.
fails("3 processes for 2 GPUs"
      TEXT "the plan uses 2 GPUs and the run has 3 processes: start one process a GPU (mpirun -n 2)"
      COMMAND ${MPI} 3 ${EXEC} ${TP2} ${SCALE})

# A process that hangs (HETRL_EXEC_STALL_RANK stops rank 1 at its first task): rank 0, waiting
# for it in a collective, ends the run after --stall-timeout.
fails("a hung process" REPORT ${OUT}/exec_stalled.json
      TEXT "hetrl-exec: error: rank 0: no progress for 4 s (at task "
      COMMAND ${CMAKE_COMMAND} -E env HETRL_EXEC_STALL_RANK=1 ${MPI} 2 ${EXEC} ${TP2} ${SCALE}
              --stall-timeout 4 --report ${OUT}/exec_stalled.json)
