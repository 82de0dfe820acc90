"""Experiments over whole training runs: compare runs, ablate one key over seeds, fit a scale ladder.

Every run here is an ordinary training of the pipeline: a config whose ID differs from its base only where a key
was changed, so the upstream artifacts (data, tokenizer, shards) are shared and only the train stage reruns.
"""
