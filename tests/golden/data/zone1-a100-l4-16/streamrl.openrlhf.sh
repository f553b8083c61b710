refused: OpenRLHF 0.11.0 cannot run this plan as planned: its pools are on different GPU types (A100-SXM-80G, L4): OpenRLHF asks Ray for GPU counts, not for GPU types
