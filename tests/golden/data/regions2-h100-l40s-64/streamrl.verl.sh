refused: verl 0.8.0.dev cannot run this plan as planned: its pools are on different GPU types (H100-SXM, L40S): verl asks Ray for GPU counts, not for GPU types
