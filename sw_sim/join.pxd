cimport cython
from sw_sim.engine cimport Primitive, Channel

cdef class _Joiner(Primitive):
    cdef public int n
    cdef public list icrd, iref, ocrd_l, oref, all_in
    cdef public Channel ocrd
    @cython.locals(c=Channel)
    cpdef object _heads(self)
    @cython.locals(i=int)
    cpdef bint _all_control(self, heads) except -1

cdef class Intersect(_Joiner):
    @cython.locals(i=int, c=Channel)
    cpdef bint step(self) except -1
    cpdef _drop(self, int i, target)
    @cython.locals(i=int)
    cpdef bint _all_data(self, list heads, m) except -1

cdef class SkipIntersect(Intersect):
    cdef public list oskip

cdef class Union(_Joiner):
    @cython.locals(i=int)
    cpdef bint step(self) except -1
