refused: OpenRLHF 0.11.0 cannot run this plan as planned: actor and critic share GPUs: OpenRLHF colocates all its models, the actor with the reference, or the critic with the reward model
