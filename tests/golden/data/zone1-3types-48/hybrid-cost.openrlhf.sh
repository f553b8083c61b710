refused: OpenRLHF 0.11.0 cannot run this plan as planned: ref_logprob runs 2 pipeline stages: OpenRLHF's DeepSpeed workers have none
