from .gpt import GPT

__all__ = ["GPT"]
