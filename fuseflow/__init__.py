"""fuseflow: the FuseFlow compiler, the SAMML graph IR and the token type shared by every package."""

from .ir import *  # noqa: F403 - the public names of the IR are the package's
from .ir import __all__  # noqa: F401
