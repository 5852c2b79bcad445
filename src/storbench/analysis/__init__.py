"""Pure functions over stored runs: metrics, summaries, comparisons, verdicts."""
