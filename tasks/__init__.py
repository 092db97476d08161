"""Pipeline stages: one module per stage, each runnable as `python -m tasks.<stage>`."""
