"""A whole model's board top seen from the command line: ``--no-host-steps`` and the
``model.json`` of ``build --board`` / ``synth --model`` (``docs/board.md``)."""

from __future__ import annotations

import argparse

from fpga.model_run import host_work, model_sequences

from .errors import UserError
from .models import model_steps

__all__ = ["board_model_manifest", "refuse_host_work"]


def refuse_host_work(args: argparse.Namespace, cm) -> None:
    """``--no-host-steps``: a model whose graphs need the host between them is refused, naming
    what the host would do (:func:`fpga.model_run.host_work`)."""
    if not getattr(args, "no_host_steps", False):
        return
    work = host_work(cm)
    if work:
        shown = "; ".join(work[:5]) + (f"; and {len(work) - 5} more" if len(work) > 5 else "")
        raise UserError(f"--no-host-steps: model {args.model} ({args.fusion}) needs the host between its graphs "
                        f"for {len(work)} step(s): {shown}")


def board_model_manifest(args: argparse.Namespace, cm, top, board: str) -> dict:
    """``model.json`` of a whole model's board top (``build --board``, ``synth``): the steps in
    order, each graph with its place in the top (index, host base), and the runs of graphs the
    on-chip sequencer starts at once (the others the host starts, with the host steps between)."""
    host_map = top.host_map()
    place = {g["name"]: (k, g["base"]) for k, g in enumerate(host_map["graphs"])}

    def entry(g, computes) -> dict:
        k, base = place[g.name]
        return {"name": g.name, "index": k, "base": base, "inputs": g.input_tensors(),
                "outputs": g.output_tensors(), "computes": computes}

    return {"model": args.model, "fusion": args.fusion, "board": board, "numerics": str(top.cfg.num),
            "graphs": [g["name"] for g in host_map["graphs"]], "sequencer": host_map["sequencer"],
            "sequences": model_sequences(cm, host_map), "host_work": host_work(cm),
            "steps": model_steps(cm, entry)}
