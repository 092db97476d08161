"""Speed and memory benchmarks, each `python -m bench.<name>`: ours against a reference path,
measured side by side in one run; tables are printed and written to `bench/results/<name>.json`."""
