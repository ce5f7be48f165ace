"""wf_decoder: a tensor-parallel INT4 GPTQ decoder built on pluggable kernel backends (PyTorch at
its best, wavefuse unfused, wavefuse fused, a float32 reference), and the engine authors' A/B
protocol in tokens per second (issue 37)."""
