"""Looking at results: conlleval scores and reports (:mod:`~seqlab.evaluation.metrics`), the calibration of
confidences (:mod:`~seqlab.evaluation.calibration`), error analyses by entity (:mod:`~seqlab.evaluation.analysis`)
and by whether each entity was seen in training (:mod:`~seqlab.evaluation.seen`), and plots of training curves and
attention (:mod:`~seqlab.evaluation.plotting`). A tagger is handed in; the package never imports it.
"""
