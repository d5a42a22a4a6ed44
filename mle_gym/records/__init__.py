"""Records of episodes: the trajectory schema, recorder and reader, replay, exports for training, the viewer, the audit.

Every file read here is untrusted input: no field of a trajectory, results file or export chooses a
sandbox, an image, a mount or a host path. May import tools (parsing, schemas), runs.rates (the
results rows the viewer shows), grading's MLE-bench report format, errors and, in replay alone, the env through Gymnasium; the audit
also reads competitions' metadata (their known leaks), and its judge the LLM clients of baselines.
"""
