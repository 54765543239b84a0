"""fpga: synthesis with yosys/nextpnr (YoWASP) for open FPGAs, reports, board tops and flashing."""
