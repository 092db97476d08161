"""Generate the sample data bundled with gpt1 (``gpt1/sample_data/``).

This package produced the bundled sample: a handful of plain-text "books" for language-model
pretraining (`corpus`), an SST-2-style sentiment task in the GLUE TSV format (`sst2`), a small
task of every other family in its release format (`glue`: CoLA, RTE, MRPC, STS-B;
`story_cloze`), and a README that describes the files (`readme`). All of it is original
synthetic text written by a seeded probabilistic grammar whose word lists and templates are the
JSON files in `data/` (read by `vocabulary`); nothing is copied from any dataset or book. The
output depends only on the seed, so a second run rewrites byte-identical files
(`tests/tools/test_sample_data.py` checks that it rewrites `gpt1/sample_data/` exactly).

Regenerate from the repository root with::

    python -m tools.sample_data            # writes gpt1/sample_data/
    python -m tools.sample_data --out DIR  # writes elsewhere
"""
