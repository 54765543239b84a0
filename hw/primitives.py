"""Every RTL primitive of fuseflow-hw, from one public module.

Each is an Amaranth ``wiring.Component`` whose stream ports (``i_<port>`` in, ``o_<port>`` out)
are ``amaranth.lib.stream`` interfaces carrying SAMML words (:mod:`hw.word`: the
:func:`hw.word.word_layout` of a data width ``cw`` for crd / ref / repsig streams, ``vw`` per
lane for values).  Constructors check their parameters and name the one that is wrong (a data
width below :data:`hw.word.CTL_WIDTH`, a joiner of fewer than two inputs, a FIFO depth below
one).  ``docs/embedding.md`` puts one into your own design; :func:`make_primitive` builds the
one a graph node declares, with the parameters the graph binds.

=================  ===========================================================================
family             components
=================  ===========================================================================
level              :class:`Root`, :class:`Scan`, :class:`LevelWrite`, :class:`ValsWrite`,
                   :class:`VecValsWrite`
join               :class:`Intersect`, :class:`Union`
repeat             :class:`RepSig`, :class:`Repeat`
coord              :class:`CrdDrop`, :class:`CrdHold`, :class:`Locate`
memory             :class:`ArrayLoad`
alu                :class:`Alu`, :class:`VecAlu`, :class:`Reduce`, :class:`VecReduce`,
                   :class:`LaneReduce`
nonlinear          :class:`UnaryAlu`, :class:`VecUnaryAlu`
accumulate         :class:`SpAcc1`, :class:`SpAcc1Double`, :class:`SpAcc2`, :class:`SpAcc2Double`
mask               :class:`CrdMask`
stream             :class:`Broadcast`, :class:`StknDrop`
parallel           :class:`Parallelize`, :class:`Serialize`
FIFOs              :class:`HeadFIFO`, :class:`RamFIFO` (``SyncFIFO`` timing)
=================  ===========================================================================
"""

from .accumulate import SpAcc1, SpAcc1Double, SpAcc2, SpAcc2Double
from .alu import Alu, LaneReduce, Reduce, VecAlu, VecReduce
from .coord import CrdDrop, CrdHold, Locate
from .elaborate import make_primitive
from .fifo import HeadFIFO, RamFIFO
from .join import Intersect, Union
from .level import LevelWrite, Root, Scan, ValsWrite, VecValsWrite
from .mask import CrdMask
from .memory import ArrayLoad
from .nonlinear import UnaryAlu, VecUnaryAlu
from .parallel import Parallelize, Serialize
from .repeat import Repeat, RepSig
from .stream import Broadcast, StknDrop

__all__ = [
    "Alu",
    "ArrayLoad",
    "Broadcast",
    "CrdDrop",
    "CrdHold",
    "CrdMask",
    "HeadFIFO",
    "Intersect",
    "LaneReduce",
    "LevelWrite",
    "Locate",
    "Parallelize",
    "RamFIFO",
    "Reduce",
    "RepSig",
    "Repeat",
    "Root",
    "Scan",
    "Serialize",
    "SpAcc1",
    "SpAcc1Double",
    "SpAcc2",
    "SpAcc2Double",
    "StknDrop",
    "UnaryAlu",
    "Union",
    "ValsWrite",
    "VecAlu",
    "VecReduce",
    "VecUnaryAlu",
    "VecValsWrite",
    "make_primitive",
]
