"""Sphinx configuration of the austerity documentation.

Build:  python -m sphinx -W -b html docs docs/_build/html   (warnings are errors; about a
minute; nothing is executed: the notebooks are shown as stored, with their saved figures).
The API pages and the gallery are written from the code at each build by
``_ext/austerity_docs.py`` (into ``api/`` and ``gallery/``, ignored by git).
"""

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))        # this checkout's packages, not an installed copy
sys.path.insert(0, str(HERE / "_ext"))

project = "austerity"
author = "the austerity developers"
copyright = "the austerity developers"
release = version = "0.1.0"

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.mathjax",
    "numpydoc",
    "myst_nb",
    "austerity_docs",
]

source_suffix = {".rst": "restructuredtext", ".md": "myst-nb", ".ipynb": "myst-nb"}
exclude_patterns = ["_build", "_templates", "figures/README*", "**/.ipynb_checkpoints"]
templates_path = ["_templates"]

# notebooks: shown as stored, never executed here
nb_execution_mode = "off"
myst_enable_extensions = ["dollarmath", "amsmath", "colon_fence"]
myst_heading_anchors = 3
suppress_warnings = ["myst.header"]

# API: numpydoc sections, autosummary stubs from the lists in api/ (see _ext)
autosummary_generate = True
autosummary_imported_members = True
autodoc_typehints = "none"
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
numpydoc_xref_param_type = False

html_theme = "pydata_sphinx_theme"
html_title = "austerity"
html_static_path = []
html_theme_options = {
    "navigation_with_keys": False,
    "header_links_before_dropdown": 7,
    "show_toc_level": 2,
    "secondary_sidebar_items": ["page-toc"],
}
html_show_sourcelink = False
# pages without sub-pages: no empty "Section Navigation" column
html_sidebars = {page: [] for page in ("index", "getting_started", "theory", "results",
                                       "design_notes")}
