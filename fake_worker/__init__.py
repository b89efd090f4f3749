"""The reference worker: the program language, a pure replay executor and a worker process."""
