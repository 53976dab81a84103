"""Verdicts: the sentences a lesson states about its outcome, produced from that run's numbers, so that what a notebook
says is true on every machine it runs on. Markdown cells explain mechanisms; outcomes come from here.

One module per lesson, named after its notebook (`mixed_precision` holds 03's sentences), and three shared ones:
`text` (which of two the course keeps, a busy machine; the ranges, ratios and "within the noise" are the library's
helpers.spread), `ladder` (a loader ladder's rows, read by role) and `sweep` (02's workers x threads sweep)."""
