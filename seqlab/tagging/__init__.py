"""The parts of the tagger: its network, its model files, model names."""
