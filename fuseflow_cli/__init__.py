"""fuseflow_cli: the ``fuseflow-hw`` command line, the top layer over every other package
(``fuseflow`` core, ``sw_sim``, ``hw``, ``rtl_sim``, ``fpga``); nothing imports it."""

from .cli import main
from .errors import UserError

__all__ = ["UserError", "main"]
