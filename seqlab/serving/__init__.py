"""A trained model put to work: the HTTP server and its workers, prediction in processes, exported networks."""
