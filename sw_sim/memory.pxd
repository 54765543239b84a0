cimport cython
from sw_sim.engine cimport Primitive, Channel
from sw_sim.staged cimport Staged

cdef class ArrayLoad(Staged):
    cdef public object mvals
    cdef public Channel inp
    cdef public list vals
    cdef public long reads, lanes
    cdef public object zero
    @cython.locals(w=long)
    cpdef bint fill(self) except -1

cdef class VecArrayLoad(ArrayLoad):
    pass
