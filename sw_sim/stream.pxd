cimport cython
from sw_sim.engine cimport Primitive, Channel

cdef class Broadcast(Primitive):
    cdef public Channel inp
    cdef public list olist
    @cython.locals(o=Channel)
    cpdef bint step(self) except -1
