"""Network building blocks shared by features, encoders and decoders: the LSTM with padding that never reaches
a real token (:mod:`~seqlab.nn.lstm`), deep-transition RNN cells (:mod:`~seqlab.nn.dt`), dropout
(:mod:`~seqlab.nn.dropout`), position signals (:mod:`~seqlab.nn.positions`), the context a batch carries through
the layers (:mod:`~seqlab.nn.context`), embedding tables updated by rows (:mod:`~seqlab.nn.rows`) and weight
version keys for caches (:mod:`~seqlab.nn.versions`). It imports nothing of seqlab's but itself.
"""
