"""The run machinery: build a run from its config, compose the compiled step, drive it
(logging, checkpoints, signals, resume) and play restored policies.
"""
