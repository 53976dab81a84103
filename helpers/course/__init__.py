"""The course layer: profiles, data locations and stand-ins, the traditional baselines the lessons measure, the
ladders and recipes with their command lines (`python -m helpers.course.bench`, `python -m helpers.course.train`),
plots, and the report runner. It imports the library in `helpers`; nothing in the library imports it. It is not
installed by `pip install .`: it runs from the course's checkout."""
