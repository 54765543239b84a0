cimport cython
from sw_sim.engine cimport Primitive, Channel

cdef class _OuterInner(Primitive):
    cdef public Channel iouter, iinner
    cdef public tuple outputs
    cdef public object cur
    cpdef on_data(self, tok, bint loaded)
    cpdef on_fiber_end(self, tok)
    cpdef on_outer_end(self, outer_stop, inner_stop)
    cpdef on_done(self)
    @cython.locals(inner=Channel, outer=Channel, loaded=bint)
    cpdef bint _data_step(self, tok) except -1
    @cython.locals(inner=Channel, outer=Channel)
    cpdef bint _done_step(self) except -1
    @cython.locals(inner=Channel, outer=Channel)
    cpdef bint _stop_step(self, tok) except -1
    @cython.locals(inner=Channel)
    cpdef bint step(self) except -1

cdef class _Pair(_OuterInner):
    cdef public Channel oouter, oinner
    cpdef held_stop(self, outer_stop, inner_stop)

cdef class CrdDrop(_Pair):
    pass

cdef class CrdHold(_Pair):
    pass

cdef class Locate(_OuterInner):
    cdef public Channel oref
    cdef public long dim
