"""The course layer: profiles, data locations and stand-ins, the traditional baselines the lessons measure, the
ladders and recipes with their command lines, plots, and the report runner. It imports the library in `helpers`;
nothing in the library imports it."""
