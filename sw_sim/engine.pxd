cimport cython

cdef class Primitive

cdef class Channel:
    cdef public str name
    cdef public int depth
    cdef public list q
    cdef public int freed
    cdef public object inc
    cdef public bint dirty
    cdef public Primitive producer
    cdef public Primitive consumer
    cdef public long count
    cdef public bint isfull
    cdef public list _dirty_list
    cpdef bint full(self)
    cpdef object head(self)
    cpdef object pop(self)
    cpdef push(self, tok)
    cpdef int occupancy(self)

cdef class NullChannel(Channel):
    pass

cdef class Primitive:
    cdef public str name
    cdef public dict ins
    cdef public dict outs
    cdef public bint done
    cdef public object stats
    cdef public Engine engine
    cdef public long _sleep_since
    cdef public long _fires
    cdef public long _sched
    cdef public long flops
    cpdef bint step(self) except -1
    @cython.locals(c=Channel)
    cpdef bint outs_ready(self)
    cpdef finish(self)

cdef class Engine:
    cdef public list prims
    cdef public list channels
    cdef public list sinks
    cdef public long cycle
    cdef public list dirty
    cdef public long node_cycles_active
    cdef public list _nxt
    cdef public list _timers
    cdef public long _seq
    cpdef long run(self, long max_cycles=*) except -1
    @cython.locals(p=Primitive, cycle=long, after=long, end_cycle=long, sinks_left=long, nxt=list, awake=list, ch=Channel, sink_set=set)
    cdef long _run(self, long max_cycles) except -1
    cpdef wake(self, Primitive p)
    @cython.locals(w=Primitive)
    cpdef long _due(self, list awake, long cycle) except -1

@cython.locals(ch=Channel, w=Primitive)
cdef _commit(list dirty, list nxt, long cycle)

