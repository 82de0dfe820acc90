"""scratchlm: raw text to a small domain language model, trained from scratch."""
__version__ = "0.1.0"
