"""hetune's command-line interface."""

import os as _os

# In a source checkout the subpackages (hetune.sim, hetune.real, ...) are the top-level folders beside
# this one (pyproject.toml's package-dir). When this folder is imported straight from the checkout (its
# parent on sys.path: `python -m pytest` or `python -c` run there), they are found through the
# checkout's root; an installed copy (a wheel, or a strict editable install's link tree) has them in
# place and its parent holds no pyproject.toml.
_root = _os.path.dirname(_os.path.dirname(_os.path.abspath(__file__)))
if _os.path.isfile(_os.path.join(_root, "pyproject.toml")) and _os.path.isdir(_os.path.join(_root, "sim")):
    __path__.append(_root)  # noqa: F821  (a package's __path__)
