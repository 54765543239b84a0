cimport cython
from sw_sim.engine cimport Primitive, Channel

cdef class UnaryAlu(Primitive):
    cdef public Channel inp, out
    cdef public object fn, opnd, res, zero
    cdef public long lanes
    @cython.locals(progressed=bint, inp=Channel)
    cpdef bint step(self) except -1

cdef class VecUnaryAlu(UnaryAlu):
    pass
