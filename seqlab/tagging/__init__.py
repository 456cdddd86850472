"""The parts of :class:`seqlab.tagger.Tagger`, each doing one job: the network (:mod:`~seqlab.tagging.network`);
inputs to arrays (:mod:`~seqlab.tagging.encoding`); batches, threads, engine and memory budget of a call
(:mod:`~seqlab.tagging.inference`); long sentences in pieces (:mod:`~seqlab.tagging.long_sentences`); confidences
(:mod:`~seqlab.tagging.confidence`) and explanations (:mod:`~seqlab.tagging.explanations`); what a prediction holds
(:mod:`~seqlab.tagging.results`); scores against gold labels (:mod:`~seqlab.tagging.scoring`); the model folder
(:mod:`~seqlab.tagging.storage`, its format in :mod:`~seqlab.tagging.modelfile`) and model names
(:mod:`~seqlab.tagging.named_models`). The parts take a tagger as their first argument and never import
:mod:`seqlab.tagger`.
"""
