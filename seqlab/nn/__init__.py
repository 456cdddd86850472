"""Network building blocks shared by features, encoders and decoders: LSTM, DT cells, dropout, the batch context."""
