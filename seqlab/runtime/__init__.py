"""How a network runs: the device and its threads (:mod:`~seqlab.runtime.devices`), NumPy's BLAS threads
(:mod:`~seqlab.runtime.blas`), the garbage collector's view of loaded models (:mod:`~seqlab.runtime.heap`), the
memory a call costs (:mod:`~seqlab.runtime.cost`), and the onnxruntime engine for the encoding
(:mod:`~seqlab.runtime.engine`, with :mod:`~seqlab.runtime.tracing`). It never imports the tagger: a tagger is
handed in.
"""
