"""Feeding the GPU: the course's helpers, in two layers.

The library is every module in this folder except the two entry points (`bench.py`, `train.py`): copy one module
into a package of your own, with the sibling files its docstring names after "Copy with:". The course layer,
`helpers.course`, holds what only the course needs (profiles, data locations, stand-ins, the traditional baselines,
ladders, recipes, verdicts, plots, the runner and its report); it imports the library, and the library never imports it.
"""
