refused: verl 0.8.0.dev cannot run this plan as planned: actor_train trains with ZeRO-3 (verl's FSDP workers) while another worker needs its Megatron workers: verl runs one strategy
