"""A trained model put to work outside a Python caller's ``predict``: the HTTP server (:mod:`~seqlab.serving.app`,
run by :mod:`~seqlab.serving.serve`; several worker processes under :mod:`~seqlab.serving.supervisor`, watched by
:mod:`~seqlab.serving.heartbeat` and restarted after :mod:`~seqlab.serving.backoff`; requests merged by
:mod:`~seqlab.serving.batcher`), bulk prediction in processes (:mod:`~seqlab.serving.parallel`) and exported
ONNX / TorchScript networks (:mod:`~seqlab.serving.export`). It sits above the tagger; only the CLI imports it.
"""
