"""The original implementations, restated independently of ours: what the tests and the
benchmarks both compare our code against. Nothing here imports gpt1."""
