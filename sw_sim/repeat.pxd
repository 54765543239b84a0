cimport cython
from sw_sim.engine cimport Primitive, Channel

cdef class RepSig(Primitive):
    cdef public Channel inp, out
    cpdef bint step(self) except -1

cdef class Repeat(Primitive):
    cdef public Channel ref, rs, out
    cdef public object cur
    @cython.locals(ref=Channel)
    cpdef bint step(self) except -1
