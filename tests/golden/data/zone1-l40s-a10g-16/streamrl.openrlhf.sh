refused: OpenRLHF 0.11.0 cannot run this plan as planned: its pools are on different GPU types (A10G, L40S): OpenRLHF asks Ray for GPU counts, not for GPU types
