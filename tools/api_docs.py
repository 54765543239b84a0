"""Write the API reference of the public modules as HTML, generated from their docstrings
with pdoc (the ``dev`` extra installs it).

    python tools/api_docs.py OUT_DIR

``OUT_DIR/index.html`` lists the modules; each module has its own page (``hw/primitives.html``).
The pages are generated, not kept in the repository.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# the public modules; a package brings its submodules along
MODULES = (
    "fuseflow.ir.samml",
    "fuseflow.compiler",
    "fuseflow.ir.tensor",
    "sw_sim",
    "hw.primitives",
    "hw.word",
    "hw.elaborate",
    "rtl_sim.api",
    "rtl_sim.streams",
)


def write_api_docs(out: Path) -> None:
    """Render :data:`MODULES` into ``out`` (created if missing)."""
    # the Python sources of the cycle model, not its compiled build: pdoc reads their source
    os.environ.setdefault("FUSEFLOW_SW_SIM", "python")
    sys.path.insert(0, str(ROOT))
    import pdoc
    import pdoc.render

    # the docstrings are written in reStructuredText (``code``, :func:`name`)
    pdoc.render.configure(docformat="restructuredtext", show_source=False)
    out.mkdir(parents=True, exist_ok=True)
    pdoc.pdoc(*MODULES, output_directory=out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", type=Path, help="directory to write the HTML pages to")
    args = ap.parse_args(argv)
    write_api_docs(args.out)
    print(f"API reference: {args.out / 'index.html'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
