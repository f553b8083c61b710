# hetrl-exec end to end on the cpu backend, with the models scaled down: a PPO plan of data-
# parallel replicas (two of most tasks, one of some) run twice with one seed and once with
# another, a GRPO plan with a rule reward, and one whose generation replica spans two GPUs. Checks what the report holds and that a seed
# gives the same run, never how fast the machine is.
#   EXEC: the tool; DATA: tests/cli/data; OUT: a scratch folder.
include(${CMAKE_CURRENT_LIST_DIR}/run_ok.cmake)

set(SCALE --layers 1 --hidden 64 --vocab 512 --backend cpu --iterations 2)
file(REMOVE ${OUT}/exec_a.json ${OUT}/exec_a_trace.json ${OUT}/exec_b.json ${OUT}/exec_c.json ${OUT}/exec_grpo.json ${OUT}/exec_tp2.json)
run(${EXEC} --cluster ${DATA}/exec_cluster.json --workload ${DATA}/exec_ppo.json --plan ${DATA}/plan_exec_ppo.json
    ${SCALE} --seed 3 --report ${OUT}/exec_a.json --trace ${OUT}/exec_a_trace.json)
foreach(piece "1 layers, hidden 64" "generate" "critic_train" "simulated s" "wrote ${OUT}/exec_a.json" "wrote ${OUT}/exec_a_trace.json")
  string(FIND "${out}" "${piece}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "the table lacks \"${piece}\":\n${out}")
  endif()
endforeach()
run(${EXEC} --cluster ${DATA}/exec_cluster.json --workload ${DATA}/exec_ppo.json --plan ${DATA}/plan_exec_ppo.json
    ${SCALE} --seed 3 --report ${OUT}/exec_b.json)
run(${EXEC} --cluster ${DATA}/exec_cluster.json --workload ${DATA}/exec_ppo.json --plan ${DATA}/plan_exec_ppo.json
    ${SCALE} --seed 4 --report ${OUT}/exec_c.json)
file(READ ${OUT}/exec_a.json a)
# The measured timeline, in hetrl-sim's trace format: each task of both iterations, each
# replica's stretches.
file(READ ${OUT}/exec_a_trace.json trace)
string(JSON events LENGTH "${trace}" traceEvents)
set(seen "")
math(EXPR last "${events} - 1")
foreach(i RANGE ${last})
  string(JSON name GET "${trace}" traceEvents ${i} name)
  list(APPEND seen "${name}")
endforeach()
foreach(name "generate replica 1" "critic_train replica 0" "actor_train" "weight_sync" "advantage")
  list(FIND seen "${name}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "the trace lacks \"${name}\": ${seen}")
  endif()
endforeach()
file(READ ${OUT}/exec_b.json b)
file(READ ${OUT}/exec_c.json c)

string(JSON schema GET "${a}" schema)
string(JSON backend GET "${a}" backend)
string(JSON iterations LENGTH "${a}" iteration_stats)
if(NOT schema STREQUAL "hetrl.execreport/v1" OR NOT backend STREQUAL "cpu" OR NOT iterations EQUAL 2)
  message(FATAL_ERROR "unexpected report header: ${schema}, ${backend}, ${iterations} iterations")
endif()
# Every task ran each iteration, GPU tasks replica by replica as the plan places them.
foreach(entry generate:2 actor_logprob:2 ref_logprob:1 critic_value:2 reward:2 actor_train:2 critic_train:1)
  string(REPLACE ":" ";" parts ${entry})
  list(GET parts 0 task)
  list(GET parts 1 replicas)
  string(JSON runs LENGTH "${a}" tasks ${task} seconds)
  string(JSON found LENGTH "${a}" tasks ${task} replica_seconds 1)
  string(JSON predicted GET "${a}" tasks ${task} predicted_seconds)
  string(JSON tokens GET "${a}" tasks ${task} tokens 0)
  if(NOT runs EQUAL 2 OR NOT found EQUAL replicas OR NOT predicted GREATER 0 OR NOT tokens GREATER 0)
    message(FATAL_ERROR "${task}: ${runs} iterations, ${found} replicas (expected ${replicas}), predicted ${predicted}, ${tokens} tokens")
  endif()
endforeach()
# hetrl-sim's seconds for the same iterations (its seed draws the same response lengths).
foreach(task generate actor_train critic_value)
  string(JSON simulated LENGTH "${a}" tasks ${task} simulated_seconds)
  string(JSON first GET "${a}" tasks ${task} simulated_seconds 0)
  if(NOT simulated EQUAL 2 OR NOT first GREATER 0)
    message(FATAL_ERROR "${task}: ${simulated} simulated iterations, the first ${first} s")
  endif()
endforeach()
string(JSON generated GET "${a}" tasks generate tokens 0)
string(JSON steps GET "${a}" iteration_stats 0 decode_steps)
if(NOT steps GREATER 0 OR steps GREATER_EQUAL generated)
  message(FATAL_ERROR "generation took ${steps} decode steps for ${generated} tokens: not batched")
endif()

# One seed, one run: the losses, scores and token counts of both runs agree; another seed differs.
string(JSON stats_a GET "${a}" iteration_stats)
string(JSON stats_b GET "${b}" iteration_stats)
string(JSON stats_c GET "${c}" iteration_stats)
if(NOT stats_a STREQUAL stats_b)
  message(FATAL_ERROR "the same seed gave two runs:\n${stats_a}\n${stats_b}")
endif()
if(stats_a STREQUAL stats_c)
  message(FATAL_ERROR "seeds 3 and 4 gave the same run:\n${stats_a}")
endif()
string(JSON loss GET "${a}" iteration_stats 1 value_loss)
if(NOT loss GREATER 0)
  message(FATAL_ERROR "the critic's loss is ${loss}")
endif()

# Generation over two GPUs a replica (TP 2), its two shards one after another here, fed by the
# weight sync from the actor trained at TP 1: it runs, one replica for generation.
run(${EXEC} --cluster ${DATA}/exec_cluster.json --workload ${DATA}/exec_grpo.json --plan ${DATA}/plan_exec_tp2.json
    --layers 1 --hidden 128 --vocab 512 --backend cpu --iterations 2 --report ${OUT}/exec_tp2.json)
file(READ ${OUT}/exec_tp2.json tp2)
string(JSON generators LENGTH "${tp2}" tasks generate replica_seconds 1)
string(JSON generated GET "${tp2}" tasks generate tokens 1)
if(NOT generators EQUAL 1 OR NOT generated GREATER 0)
  message(FATAL_ERROR "TP 2 generation: ${generators} replicas, ${generated} tokens")
endif()

# GRPO with a rule reward: its score is the share of even response tokens.
run(${EXEC} --cluster ${DATA}/exec_cluster.json --workload ${DATA}/exec_grpo.json --plan ${DATA}/plan_exec_grpo.json
    ${SCALE} --report ${OUT}/exec_grpo.json)
file(READ ${OUT}/exec_grpo.json g)
string(JSON score GET "${g}" iteration_stats 0 mean_score)
string(JSON has_reward ERROR_VARIABLE missing GET "${g}" tasks reward)
if(NOT score GREATER 0 OR NOT score LESS 1 OR missing STREQUAL "")
  message(FATAL_ERROR "GRPO: mean score ${score}; the rule reward ran as a GPU task: ${has_reward}")
endif()

# Prompts of 1,200 tokens: the 8 samples of each of the two generation replicas, admitted
# together, prefill in passes within the cost model's prefill chunk of 8,192 tokens (6 prompts
# a pass: two passes a replica), as an engine batches the tokens of a step; the short prompts
# above in one pass a replica.
file(REMOVE ${OUT}/exec_long_prompts.json)
run(${EXEC} --cluster ${DATA}/exec_cluster.json --workload ${DATA}/exec_grpo_long_prompts.json
    --plan ${DATA}/plan_exec_grpo.json --layers 1 --hidden 64 --vocab 512 --backend cpu --iterations 1
    --report ${OUT}/exec_long_prompts.json)
file(READ ${OUT}/exec_long_prompts.json long)
string(JSON replicas LENGTH "${long}" tasks generate replica_seconds 0)
string(JSON passes GET "${long}" iteration_stats 0 prefill_passes)
math(EXPR expected "2 * ${replicas}")
string(JSON short GET "${g}" iteration_stats 0 prefill_passes)
string(JSON short_replicas LENGTH "${g}" tasks generate replica_seconds 0)
if(NOT passes EQUAL expected OR NOT short EQUAL short_replicas)
  message(FATAL_ERROR "prefill passes: ${passes} for 16 prompts of 1,200 tokens over ${replicas} generation "
                      "replicas (2 a replica expected), ${short} for short prompts over ${short_replicas}")
endif()
