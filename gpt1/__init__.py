"""gpt1: GPT-1 (Radford et al. 2018) pretraining and fine-tuning, as a library."""

__version__ = "0.1.0"
