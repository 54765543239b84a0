cimport cython
from sw_sim.engine cimport Primitive, Channel

cdef class Staged(Primitive):
    cdef public list stages
    cdef public Channel out
    cpdef object leave_front(self, v)
    cpdef bint step(self) except -1
    cpdef bint fill(self) except -1
    @cython.locals(k=int, st=list, progressed=bint)
    cpdef object advance(self)
