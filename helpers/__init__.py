"""Feeding the GPU: the course's helpers, in two layers.

The library is every module in this folder: copy one module into a package of your own, with the sibling files its
docstring names after "Copy with:", or install them all: `pip install .` installs this folder's modules as the
package `feeding_the_gpu` (`from feeding_the_gpu.loading import make_loader`), never under the generic name
`helpers`. The course layer, `helpers.course`, holds what only the course needs (profiles, data locations,
stand-ins, the traditional baselines, ladders, recipes, verdicts, plots, the runner and its report, and the command
lines `python -m helpers.course.train` and `python -m helpers.course.bench`); it imports the library, the library never imports it,
and it is not installed: it runs from the course's checkout, which the notebooks and the Makefile put on the path.
"""
