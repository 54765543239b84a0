cimport cython
from sw_sim.engine cimport Primitive, Channel
from sw_sim.alu cimport Staged

cdef class ArrayLoad(Staged):
    cdef public object mvals
    cdef public Channel inp
    cdef public list vals
    cdef public long reads
    @cython.locals(st=list)
    cpdef bint step(self) except -1
