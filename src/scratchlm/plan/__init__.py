"""Plan before you train: model arithmetic, a memory estimate, a probe on the real hardware, the time the run
will take, and verdicts on whether the corpus, the memory, the budget and the context length fit.

`scratchlm plan` prints the plan; `scratchlm check` runs the preflight checklist; `scratchlm run` plans first
and refuses a plan that ends in error unless `--force`.
"""
