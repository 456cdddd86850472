"""How a network runs: devices and threads, BLAS threads, memory cost, the onnxruntime engine."""
