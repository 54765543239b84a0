cimport cython
from sw_sim.engine cimport Channel
from sw_sim.staged cimport Staged

cdef class UnaryAlu(Staged):
    cdef public Channel inp
    cdef public object fn, zero
    cdef public long lanes
    cpdef object leave_front(self, v)
    @cython.locals(inp=Channel)
    cpdef bint fill(self) except -1

cdef class VecUnaryAlu(UnaryAlu):
    pass
