"""The compiler's passes, one module each, named after the pass (the order is
:data:`fuseflow.compiler.pipeline.PIPELINE`)."""
