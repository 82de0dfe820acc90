"""The decontaminate stage: find eval-set text inside the training data, and cut it out of training.

The classic mistake it catches is training on (a copy of) the benchmark you later report. Every eval item is
fingerprinted as hashed word n-grams (data/dedup/fingerprint.py, ngram_index.py: the data stage draws its
validation split by the same measure, data/val_guard.py); every training document is scanned for them
(data/dedup/ngram_scan.py, corpus_scan.py, over a pool of spawned processes); what matches is removed (cut.py) and reported
(report.py). stage.py runs this on the data stage's training split against the validation split and the user's
[[eval.sets]]; check.py runs it on any files for `scratchlm data contamination` (command.py).
"""
